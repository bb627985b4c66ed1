use cheng_sdk::prelude::*;

#[cheng_sdk::schema]
struct Input {
    name: String,
}
#[cheng_sdk::schema]
struct Output {
    greeting: String,
}

struct Hello;
impl Tool for Hello {
    const NAME: &'static str = "hello";
    const DESCRIPTION: &'static str = "Greets someone by name.";
    type Input = Input;
    type Output = Output;
    fn run(i: Input, _: &Context) -> Result<Output, Failure> {
        Ok(Output { greeting: format!("Hello, {}!", i.name) })
    }
}
cheng_sdk::export_tools!(Hello);

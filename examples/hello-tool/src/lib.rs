#[cheng_sdk::schema]
struct Greeting {
    greeting: String,
}
/// Greets someone by name.
#[cheng_sdk::tool(export)]
fn hello(name: String) -> Greeting {
    Greeting { greeting: format!("Hello, {name}!") }
}

//! The `notes` component: the two tools that touch no path. `think` is a scratchpad (the
//! thought is kept only in the call record); `todo_write` replaces the run's plan, which
//! the host keeps per run (the `run-state` import), never in the workspace.

use cheng_sdk::host;
use cheng_sdk::prelude::*;

/// Longest thought accepted.
pub const MAX_THOUGHT_BYTES: usize = 64 * 1024;
/// Most items in a plan.
pub const MAX_TODOS: usize = 100;
/// Longest item text.
pub const MAX_TODO_CHARS: usize = 2000;
const PLAN_KEY: &str = "todos";

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThinkInput {
    thought: String,
}

#[derive(Serialize, JsonSchema)]
pub struct ThinkOutput {
    // Always true.
    success: bool,
    summary: String,
}

pub struct Think;
impl Tool for Think {
    const NAME: &'static str = "think";
    const DESCRIPTION: &'static str =
        "Note reasoning, a plan or what you learned, without acting. Changes nothing; only the call record keeps it.";
    type Input = ThinkInput;
    type Output = ThinkOutput;
    fn run(input: ThinkInput, _cx: &Context) -> Result<ThinkOutput, Failure> {
        if input.thought.len() > MAX_THOUGHT_BYTES {
            return Err(Failure::new(
                ErrorKind::TooLarge,
                format!("the thought is {} bytes; keep it under {MAX_THOUGHT_BYTES}", input.thought.len()),
            ));
        }
        let words = input.thought.split_whitespace().count();
        Ok(ThinkOutput { success: true, summary: format!("Noted a thought of {words} words") })
    }
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone)]
#[serde(deny_unknown_fields)]
pub struct Todo {
    /// Stable, unique.
    id: String,
    content: String,
    status: TodoStatus,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoInput {
    todos: Vec<Todo>,
}

#[derive(Serialize, JsonSchema)]
pub struct TodoOutput {
    // True when the plan was stored; `summary` gives counts by status.
    success: bool,
    summary: String,
    todos: Vec<Todo>,
    /// Before this call.
    previous: Vec<Todo>,
}

pub struct TodoWrite;
impl Tool for TodoWrite {
    const NAME: &'static str = "todo_write";
    const DESCRIPTION: &'static str =
        "Replace the run's plan with the whole list; the host keeps it outside the workspace.";
    type Input = TodoInput;
    type Output = TodoOutput;
    fn run(input: TodoInput, _cx: &Context) -> Result<TodoOutput, Failure> {
        if input.todos.len() > MAX_TODOS {
            return Err(Failure::new(
                ErrorKind::TooLarge,
                format!("{} items; a plan holds at most {MAX_TODOS}: merge or drop finished ones", input.todos.len()),
            ));
        }
        let mut ids = std::collections::HashSet::new();
        for t in &input.todos {
            if t.id.trim().is_empty() {
                return Err(Failure::invalid_argument("every item needs a non-empty id"));
            }
            if !ids.insert(t.id.as_str()) {
                return Err(Failure::invalid_argument(format!("id \"{}\" appears twice; ids must be unique", t.id)));
            }
            if t.content.chars().count() > MAX_TODO_CHARS {
                return Err(Failure::new(
                    ErrorKind::TooLarge,
                    format!("item \"{}\" is longer than {MAX_TODO_CHARS} characters", t.id),
                ));
            }
        }
        let previous: Vec<Todo> =
            host::state_get(PLAN_KEY).and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default();
        let json = serde_json::to_string(&input.todos).map_err(|e| Failure::new(ErrorKind::Crashed, e.to_string()))?;
        host::state_set(PLAN_KEY, &json)?;
        let count = |s: TodoStatus| input.todos.iter().filter(|t| t.status == s).count();
        let summary = format!(
            "Plan saved: {} items ({} pending, {} in progress, {} completed)",
            input.todos.len(),
            count(TodoStatus::Pending),
            count(TodoStatus::InProgress),
            count(TodoStatus::Completed)
        );
        Ok(TodoOutput { success: true, summary, todos: input.todos, previous })
    }
}

cheng_sdk::export_tools!(Think, TodoWrite);

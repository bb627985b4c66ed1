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
    /// The thought: reasoning, a plan, what was learned. Nothing outside the call record sees it.
    thought: String,
}

#[derive(Serialize, JsonSchema)]
pub struct ThinkOutput {
    /// Always true.
    success: bool,
    /// One sentence.
    summary: String,
}

pub struct Think;
impl Tool for Think {
    const NAME: &'static str = "think";
    const DESCRIPTION: &'static str = "Think out loud: note reasoning, a plan or what you learned, without acting. \
        Changes nothing; the thought is kept in the call record only.";
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
    /// A short stable id, unique in the plan.
    id: String,
    /// What to do.
    content: String,
    /// pending, in_progress or completed.
    status: TodoStatus,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoInput {
    /// The whole plan, replacing the previous one.
    todos: Vec<Todo>,
}

#[derive(Serialize, JsonSchema)]
pub struct TodoOutput {
    /// True when the plan was stored.
    success: bool,
    /// Counts by status.
    summary: String,
    /// The plan as stored.
    todos: Vec<Todo>,
    /// The plan before this call (empty for the run's first plan).
    previous: Vec<Todo>,
}

pub struct TodoWrite;
impl Tool for TodoWrite {
    const NAME: &'static str = "todo_write";
    const DESCRIPTION: &'static str = "Write the run's task list (the whole list each time): items with an id, the \
        content and a status (pending, in_progress, completed). The host keeps it for the run, outside the \
        workspace; the result returns the stored list and the previous one.";
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

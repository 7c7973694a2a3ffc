//! The chaos run's built-in handler: it succeeds, so every change's event must end with its
//! internal status `done` whatever the faults (a repeat after a lost acknowledgement is allowed:
//! built-in handlers are idempotent).

use serde_json::{json, Value};
use shared::delivery::worker::internal::{InternalCall, InternalHandler, InternalRegistry};
use shared::domain::classify::AttemptClass;
use std::sync::Arc;

pub const NAME: &str = "chaos_builtin";

struct Builtin;

/// What `handle` returns (`InternalHandler` is an `async_trait`: this is the type it writes).
type Handled<'f> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Value, (AttemptClass, String)>> + Send + 'f>,
>;

impl InternalHandler for Builtin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handle<'a, 'b, 'f>(&'a self, call: InternalCall<'b>) -> Handled<'f>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        let handled = json!({"handled": call.delivery_id.as_str()});
        Box::pin(async move { Ok(handled) })
    }
}

/// The worker's built-in handlers in a chaos run.
pub fn registry() -> InternalRegistry {
    let mut registry = InternalRegistry::default();
    registry.register(Arc::new(Builtin));
    registry
}

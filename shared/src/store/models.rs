//! The items of the delivery table as Rust types (read and written with `serde_dynamo`). Key
//! attributes are derived from the ids by [`super::keys`] when an item is written.

pub use super::account::Account;
pub use super::delivery::{AttemptRecord, Delivery as DeliveryRecord, DeliveryWork};
pub use super::event::EventRecord;
pub use super::integration::Integration;
pub use super::subscription::Subscription;

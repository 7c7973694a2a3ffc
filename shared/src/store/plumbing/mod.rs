//! How the store talks to DynamoDB, whatever the item (the items are the store's other modules).

pub mod attrs;
pub mod chain;
pub mod cursor;
pub mod expr;
pub mod item;
pub mod keys;
pub mod listing;
pub mod page;
pub mod read;
pub mod update;
pub mod write;

//! What every stored item is on the wire, and the one error of the store: an [`Item`] (the SDK's
//! attribute map), [`to_item`] and [`from_item`] between it and an item type, and [`StoreError`].

use serde::{de::DeserializeOwned, Serialize};
use std::collections::HashMap;

pub type Item = HashMap<String, aws_sdk_dynamodb::types::AttributeValue>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("DynamoDB: {0}")]
    Dynamo(String),
    /// DynamoDB refused the load and the SDK's retries did not get through.
    #[error("DynamoDB throttled the request: {0}")]
    Throttled(String),
    /// A transaction kept meeting concurrent transactions on its items.
    #[error("DynamoDB transaction conflict: {0}")]
    Conflict(String),
    /// The lifecycle table refuses the move a write was asked to make.
    #[error("invalid move: {0}")]
    Transition(#[from] crate::domain::lifecycle::TransitionError),
    #[error("stored item {key} does not have the expected shape: {message}")]
    Shape { key: String, message: String },
}

impl StoreError {
    pub fn dynamo(e: impl std::error::Error) -> Self {
        StoreError::Dynamo(Self::describe(&e))
    }

    pub fn throttled(e: impl std::error::Error) -> Self {
        StoreError::Throttled(Self::describe(&e))
    }

    /// The error and its sources, each as it displays itself: the SDK's own Display is terse
    /// ("service error"), its sources name the code and the message. Never its Debug form, which
    /// repeats them with the raw response around them.
    fn describe(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            // An operation's error displays as the service error it wraps: said once.
            let said = s.to_string();
            if !text.contains(&said) {
                text.push_str(": ");
                text.push_str(&said);
            }
            source = s.source();
        }
        text.chars().take(600).collect()
    }
}

/// An item of `T` with its keys and `kind` tag added.
pub fn to_item<T: Serialize>(
    value: &T,
    pk: &str,
    sk: &str,
    kind: &str,
) -> Result<Item, StoreError> {
    let mut item: Item = serde_dynamo::to_item(value).map_err(|e| StoreError::Shape {
        key: format!("{pk}/{sk}"),
        message: e.to_string(),
    })?;
    item.insert("pk".into(), super::expr::s(pk));
    item.insert("sk".into(), super::expr::s(sk));
    item.insert("kind".into(), super::expr::s(kind));
    Ok(item)
}

pub fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, StoreError> {
    let key = format!(
        "{}/{}",
        item.get("pk")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str)
            .unwrap_or("?"),
        item.get("sk")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str)
            .unwrap_or("?")
    );
    serde_dynamo::from_item(item).map_err(|e| StoreError::Shape {
        key,
        message: e.to_string(),
    })
}

/// Turns a request builder's error into a store error (a builder fails only on a missing
/// required field: a bug in the pure function that built it).
pub fn built<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, StoreError> {
    r.map_err(|e| StoreError::Dynamo(format!("building a request: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::SdkError;
    use aws_sdk_dynamodb::operation::put_item::PutItemError;
    use aws_sdk_dynamodb::types::error::ProvisionedThroughputExceededException;
    use aws_smithy_runtime_api::http::{Response, StatusCode};
    use aws_smithy_types::body::SdkBody;

    #[test]
    fn a_throttled_request_is_described_by_its_code_and_message_not_its_debug_form() {
        let throttle = ProvisionedThroughputExceededException::builder()
            .message("The level of configured provisioned throughput for the table was exceeded.")
            .build();
        let raw = Response::new(StatusCode::try_from(400).unwrap(), SdkBody::from("{}"));
        let e = SdkError::service_error(
            PutItemError::ProvisionedThroughputExceededException(throttle),
            raw,
        );
        let text = StoreError::throttled(e).to_string();
        assert!(
            text.contains("ProvisionedThroughputExceededException")
                && text.contains("provisioned throughput for the table was exceeded"),
            "{text}"
        );
        for debug in ["ServiceError {", "ErrorMetadata", "Response {", "Some("] {
            assert!(!text.contains(debug), "{debug} in {text}");
        }
        assert_eq!(
            text.matches("was exceeded").count(),
            1,
            "the message once: {text}"
        );
    }
}

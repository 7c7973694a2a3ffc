//! What an adapter call produced, whichever adapter made it.

use crate::domain::classify::AttemptClass;

/// Longest piece of a response body or error kept on an attempt record.
pub const DETAIL_LIMIT: usize = 512;

#[derive(Debug, Clone, PartialEq)]
pub struct AttemptResult {
    pub class: AttemptClass,
    pub http_status: Option<u16>,
    /// The start of the response or the error, for the attempt history.
    pub detail: Option<String>,
    /// The classified error of an attempt that got no answer ([`AttemptRecord::error`]).
    ///
    /// [`AttemptRecord::error`]: crate::store::delivery::AttemptRecord::error
    pub error: Option<&'static str>,
    /// What a built-in handler stored, recorded on the event (internal status `done`).
    pub internal_result: Option<serde_json::Value>,
}

impl AttemptResult {
    pub fn new(class: AttemptClass, http_status: Option<u16>, detail: Option<String>) -> Self {
        AttemptResult {
            class,
            http_status,
            detail: detail.map(truncate),
            error: None,
            internal_result: None,
        }
    }

    /// With its classified error.
    pub fn error(self, error: &'static str) -> Self {
        AttemptResult {
            error: Some(error),
            ..self
        }
    }

    pub fn configuration_loss(detail: impl Into<String>) -> Self {
        Self::new(AttemptClass::ConfigurationLoss, None, Some(detail.into()))
            .error("configuration_loss")
    }
}

/// Cuts text to [`DETAIL_LIMIT`] bytes on a character boundary.
pub fn truncate(mut text: String) -> String {
    if text.len() > DETAIL_LIMIT {
        let mut end = DETAIL_LIMIT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_on_a_character_boundary() {
        let long = "é".repeat(600);
        let cut = truncate(long);
        assert!(cut.len() <= DETAIL_LIMIT + '…'.len_utf8());
        assert!(cut.ends_with('…'));
        assert_eq!(truncate("short".into()), "short");
    }
}

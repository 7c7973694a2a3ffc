//! What a request gives an operation, whichever door it came through: a field of an edit that
//! may be left as it is ([`Patch`]), and the problems found in its fields, every one of them at
//! once ([`FieldErrors`]), each named by the field it is about.

use serde::{Deserialize, Serialize};

/// A field of an edit: left out (leave it as it is), `null` (remove it), or a new value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Patch<T> {
    #[default]
    Absent,
    Null,
    Set(T),
}

impl<T> Patch<T> {
    pub fn is_absent(&self) -> bool {
        matches!(self, Patch::Absent)
    }

    /// The new value, if one is given.
    pub fn set(&self) -> Option<&T> {
        match self {
            Patch::Set(v) => Some(v),
            _ => None,
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Patch<U> {
        match self {
            Patch::Absent => Patch::Absent,
            Patch::Null => Patch::Null,
            Patch::Set(v) => Patch::Set(f(v)),
        }
    }
}

/// One invalid field of a request. `field` is the request's own name for it, dotted for nested
/// parts (`retry_policy.max_retries`) and indexed for list items (`fields[2]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Every problem found in a request's fields, in the order they were found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldErrors(Vec<FieldError>);

impl FieldErrors {
    pub fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &FieldError> {
        self.0.iter()
    }

    pub fn into_vec(self) -> Vec<FieldError> {
        self.0
    }

    /// `Ok(value)` when nothing was refused.
    pub fn or<T>(self, value: T) -> Result<T, FieldErrors> {
        if self.is_empty() {
            Ok(value)
        } else {
            Err(self)
        }
    }

    /// The fields refused, in order.
    pub fn fields(&self) -> Vec<&str> {
        self.0.iter().map(|e| e.field.as_str()).collect()
    }

    /// The value `make` builds when no problem was found, else the problems.
    pub fn or_value<T>(self, make: impl FnOnce() -> Option<T>) -> Result<T, FieldErrors> {
        match (self.is_empty(), make()) {
            (true, Some(v)) => Ok(v),
            (true, None) => {
                let mut this = self;
                this.add("", "a checked field is missing (a bug)");
                Err(this)
            }
            (false, _) => Err(self),
        }
    }
}

impl From<Vec<FieldError>> for FieldErrors {
    fn from(v: Vec<FieldError>) -> Self {
        FieldErrors(v)
    }
}

impl std::fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: Vec<String> = self
            .0
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        f.write_str(&shown.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_built_only_when_no_field_was_refused() {
        let ok = FieldErrors::default().or_value(|| Some(3));
        assert_eq!(ok, Ok(3));
        let mut errors = FieldErrors::default();
        errors.add("name", "must not be empty");
        let refused = errors.or_value(|| Some(3)).unwrap_err();
        assert_eq!(refused.to_string(), "name: must not be empty");
    }

    #[test]
    fn a_value_missing_without_a_recorded_problem_is_refused_not_invented() {
        let refused = FieldErrors::default().or_value(|| None::<u8>);
        assert!(refused.is_err());
    }
}

//! Extractors whose rejections are [`ApiError`]s, so that a malformed body, path or query gets a
//! problem+json response like every other failure.
//!
//! Request bodies are read with [`JsonBody`]: the body must be a JSON object (400 otherwise), and
//! handlers take its fields one by one through [`Fields`], which collects *every* invalid field
//! (wrong type, missing, unknown) before answering one 422 that names them all. Nested values are
//! deserialized with serde as a whole, so a field's error message is serde's, prefixed by the
//! field's name.

use super::problem::{ApiError, FieldError};
use crate::domain::input::FieldErrors;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::str::FromStr;

/// A JSON object body. An empty body reads as `{}` (so bodies whose fields are all optional may be
/// left out, and a POST without one names every required field in its 422), except on a PATCH or
/// a PUT, whose body is what changes (a PUT without one would replace the resource with nothing):
/// there it is a 400. Any other body must be declared JSON
/// (`application/json` or `…+json`, else 415) and be a JSON object (else 400).
pub struct JsonBody(pub Fields);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let method = req.method().clone();
        let bytes = Bytes::from_request(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            if method == axum::http::Method::PATCH {
                return Err(ApiError::malformed(
                    "a PATCH needs a JSON object body naming the fields to change ({} changes nothing)",
                ));
            }
            if method == axum::http::Method::PUT {
                return Err(ApiError::malformed(
                    "a PUT needs a JSON object body: what the resource becomes",
                ));
            }
            return Ok(JsonBody(Fields::new(Map::new())));
        }
        if !content_type.as_deref().is_some_and(is_json_media_type) {
            return Err(ApiError::UnsupportedMediaType {
                detail: "the request body must be JSON, sent with `Content-Type: application/json`"
                    .into(),
            });
        }
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::malformed(format!("the request body is not valid JSON: {e}")))?;
        match value {
            Value::Object(map) => Ok(JsonBody(Fields::new(map))),
            other => Err(ApiError::malformed(format!(
                "the request body must be a JSON object, not {}",
                json_kind(&other)
            ))),
        }
    }
}

fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The JSON type of a value, for messages.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A number with no fractional part written as a float (`5.0`), as an integer value.
fn integral(value: &Value) -> Option<Value> {
    let f = value.as_f64().filter(|_| value.is_f64())?;
    if f.fract() != 0.0 || !f.is_finite() {
        return None;
    }
    if (0.0..=u64::MAX as f64).contains(&f) {
        Some(Value::from(f as u64))
    } else if (i64::MIN as f64..0.0).contains(&f) {
        Some(Value::from(f as i64))
    } else {
        None
    }
}

pub use crate::domain::input::Patch;

/// The fields of a JSON object body, read one at a time. Every field a handler asks about is
/// "known"; [`Fields::finish`] refuses the others (a typo such as `webhook_uri` is an error, not a
/// silently ignored field) together with every error gathered on the way.
#[derive(Debug)]
pub struct Fields {
    map: Map<String, Value>,
    known: BTreeSet<String>,
    /// The fields in the order they were asked about (the order a refusal names them in).
    asked: Vec<String>,
    errors: Vec<FieldError>,
}

impl Fields {
    pub fn new(map: Map<String, Value>) -> Self {
        Fields {
            map,
            known: BTreeSet::new(),
            asked: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Whether the body holds the field (even as `null`).
    pub fn has(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// A field that must be present and not `null`. `None` means an error was recorded.
    pub fn required<T: DeserializeOwned>(&mut self, name: &str) -> Option<T> {
        match self.read(name)? {
            Patch::Set(v) => Some(v),
            Patch::Absent => {
                self.error(name, "is required");
                None
            }
            Patch::Null => {
                self.error(name, "is required and must not be null");
                None
            }
        }
    }

    /// A field that may be left out (`None`). `null` is not a value of it: an error, as the
    /// spec's schemas say (fields that take `null` are read with [`Fields::patch`]).
    pub fn optional<T: DeserializeOwned>(&mut self, name: &str) -> Option<T> {
        match self.patch(name) {
            Patch::Set(v) => Some(v),
            Patch::Absent => None,
            Patch::Null => {
                self.error(name, "must not be null; leave the field out instead");
                None
            }
        }
    }

    /// A field of a PATCH body: absent, `null` or a value. A value of the wrong type records an
    /// error and reads as absent.
    pub fn patch<T: DeserializeOwned>(&mut self, name: &str) -> Patch<T> {
        self.read(name).unwrap_or(Patch::Absent)
    }

    /// `None` when the value has the wrong type (the error is recorded).
    fn read<T: DeserializeOwned>(&mut self, name: &str) -> Option<Patch<T>> {
        self.ask(name);
        match self.map.get(name) {
            None => Some(Patch::Absent),
            Some(Value::Null) => Some(Patch::Null),
            Some(value) => match T::deserialize(value).or_else(|e| {
                // JSON has one number type: `5.0` is the integer 5 (as JSON Schema's `integer`
                // says), which serde's integer types refuse.
                // The same for the items of an array (a list of statuses, say).
                let whole = match value {
                    Value::Array(items) if items.iter().any(Value::is_f64) => Some(Value::Array(
                        items
                            .iter()
                            .map(|v| integral(v).unwrap_or_else(|| v.clone()))
                            .collect(),
                    )),
                    _ => integral(value),
                };
                match whole {
                    Some(n) => T::deserialize(&n),
                    None => Err(e),
                }
            }) {
                Ok(v) => Some(Patch::Set(v)),
                Err(e) => {
                    self.error(name, e.to_string());
                    None
                }
            },
        }
    }

    /// A required text field: trimmed, not empty, at most `max_chars` characters, no control
    /// characters. Returns the trimmed text.
    pub fn required_text(&mut self, name: &str, max_chars: usize) -> Option<String> {
        let text: String = self.required(name)?;
        self.check_text(name, text, max_chars)
    }

    /// The length is the text's as sent (as the spec's `maxLength` counts it), the other checks
    /// are the trimmed text's.
    fn check_text(&mut self, name: &str, text: String, max_chars: usize) -> Option<String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            self.error(name, "must not be empty");
            None
        } else if text.chars().count() > max_chars {
            self.error(name, format!("must be at most {max_chars} characters"));
            None
        } else if trimmed.chars().any(char::is_control) {
            self.error(name, "must not contain control characters");
            None
        } else {
            Some(trimmed.to_owned())
        }
    }

    /// The raw JSON of a field (for values validated by their own parser, such as filters).
    pub fn raw(&mut self, name: &str) -> Patch<Value> {
        self.patch(name)
    }

    /// Refuses a field outright, with a reason (e.g. `status` moves only through the system).
    pub(crate) fn forbid(&mut self, name: &str, reason: &str) {
        self.ask(name);
        if self.map.contains_key(name) {
            self.error(name, reason);
        }
    }

    pub fn error(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError::new(field, message));
    }

    /// Records the problems an operation's own checks found (the domain's rules of a valid
    /// value), after the ones found reading the fields.
    fn ask(&mut self, name: &str) {
        if self.known.insert(name.to_owned()) {
            self.asked.push(name.to_owned());
        }
    }

    /// A field already named while reading (a wrong type, a missing value) is not named again:
    /// the check saw it as absent.
    pub fn absorb(&mut self, errors: FieldErrors) {
        let named: BTreeSet<String> = self.errors.iter().map(|e| e.field.clone()).collect();
        let new = errors.into_vec().into_iter();
        self.errors
            .extend(new.filter(|e| !named.contains(&e.field)));
    }

    /// Finishes with an operation's checked value: its problems and the body's are answered
    /// together in one 422.
    pub(crate) fn finish_with<T>(mut self, checked: Result<T, FieldErrors>) -> Result<T, ApiError> {
        match checked {
            Ok(value) => self.finish().map(|()| value),
            Err(errors) => {
                self.absorb(errors);
                // The body's problems and the check's, in the order of the request's fields
                // (`auth.type` under `auth`).
                let asked = &self.asked;
                let position = |e: &FieldError| {
                    let root = e.field.split(['.', '[']).next().unwrap_or_default();
                    asked.iter().position(|a| a == root).unwrap_or(usize::MAX)
                };
                self.errors.sort_by_key(position);
                self.finish()?;
                Err(ApiError::internal("a refused value named no field"))
            }
        }
    }

    pub(crate) fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Every error recorded, plus one per unknown field; `Ok` when there are none.
    pub fn finish(mut self) -> Result<(), ApiError> {
        let unknown: Vec<String> = self
            .map
            .keys()
            .filter(|k| !self.known.contains(*k))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            let expected = self
                .known
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ");
            for key in unknown {
                self.error(
                    key,
                    format!("is not a field of this request; expected {expected}"),
                );
            }
        }
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ApiError::Validation {
                errors: self.errors,
            })
        }
    }
}

/// `Path` with problem+json rejections.
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(value) = Path::<T>::from_request_parts(parts, state).await?;
        Ok(ApiPath(value))
    }
}

/// `Query` with problem+json rejections.
pub(crate) struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(value) = Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(value))
    }
}

pub use crate::ids::{canonical_id, new_id, MAX_ID_LEN};

/// A resource id given by a caller (path, query, body), used verbatim: 1 to [`MAX_ID_LEN`]
/// ASCII letters, digits, `-` or `_` ([`crate::ids::is_id_text`], checked here whatever `T` is,
/// so that `String` keys get the same check), parsed into the id type the caller names. The API issues lowercase ULIDs, but ids written by other tools (fixtures,
/// migrations) are looked up exactly as they are.
pub fn resource_id<T: FromStr>(text: &str) -> Option<T> {
    crate::ids::is_id_text(text)
        .then(|| text.parse().ok())
        .flatten()
}

/// An id taken from a path, parsed once here into its typed id: anything that is not an id
/// names nothing, so it is a 404 for `what`.
pub fn path_id<T: FromStr>(text: &str, what: &str) -> Result<T, ApiError> {
    resource_id(text).ok_or_else(|| ApiError::not_found(what))
}

/// The id a list of resources continues after, from its `?cursor=` (a cursor of
/// [`crate::store::cursor`]), or a `422` when it is not a cursor of such a list.
pub(crate) fn cursor_id<T: FromStr>(cursor: Option<&str>) -> Result<Option<T>, ApiError> {
    cursor
        .map(|c| {
            crate::store::cursor::decode(c)
                .and_then(|position| resource_id(&position))
                .ok_or_else(|| ApiError::field("cursor", "is not a cursor of this list"))
        })
        .transpose()
}

/// Page size of list routes.
pub(crate) const DEFAULT_PAGE: u32 = 50;
pub(crate) const MAX_PAGE: u32 = 100;

/// Checks `?limit=`: 1 to [`MAX_PAGE`], default [`DEFAULT_PAGE`].
pub fn page_limit(limit: Option<u32>) -> Result<u32, ApiError> {
    match limit {
        None => Ok(DEFAULT_PAGE),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::field(
            "limit",
            format!("must be between 1 and {MAX_PAGE}; got {n}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::IntegrationId;
    use serde_json::json;

    fn fields(v: Value) -> Fields {
        match v {
            Value::Object(m) => Fields::new(m),
            _ => unreachable!(),
        }
    }

    #[test]
    fn collects_every_error_and_refuses_unknown_fields() {
        let mut f = fields(json!({"name": 5, "flag": true, "webhook_uri": "x", "note": null}));
        assert_eq!(f.required::<String>("name"), None);
        assert_eq!(f.required::<bool>("flag"), Some(true));
        assert_eq!(f.required::<String>("missing"), None);
        assert_eq!(f.optional::<String>("note"), None);
        let Err(ApiError::Validation { errors }) = f.finish() else {
            panic!("expected a validation error")
        };
        let named: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(named, ["name", "missing", "note", "webhook_uri"]);
        assert!(errors[0].message.contains("expected a string"));
    }

    #[test]
    fn an_integral_float_is_an_integer() {
        let mut f = fields(json!({"n": 5.0, "m": 5.5, "k": 7}));
        assert_eq!(f.required::<u32>("n"), Some(5));
        assert_eq!(f.required::<u32>("m"), None);
        assert_eq!(f.required::<u32>("k"), Some(7));
        assert!(f.finish().is_err());
        // The same for the items of a list.
        let mut f = fields(json!({"l": [401.0, 403], "x": [401.5]}));
        assert_eq!(f.required::<Vec<u16>>("l"), Some(vec![401, 403]));
        assert_eq!(f.required::<Vec<u16>>("x"), None);
    }

    #[test]
    fn patch_tells_absent_null_and_set_apart() {
        let mut f = fields(json!({"a": null, "b": "x"}));
        assert_eq!(f.patch::<String>("a"), Patch::Null);
        assert_eq!(f.patch::<String>("b"), Patch::Set("x".into()));
        assert_eq!(f.patch::<String>("c"), Patch::Absent);
        f.forbid("status", "cannot be changed");
        assert!(f.finish().is_ok());
    }

    #[test]
    fn ids_are_canonical_lowercase_ulids() {
        let id = new_id();
        assert_eq!(id.len(), 26);
        assert_eq!(canonical_id(&id.to_ascii_uppercase()), Some(id.clone()));
        assert_eq!(canonical_id("not-an-id"), None);
        assert_eq!(
            canonical_id("zzzzzzzzzzzzzzzzzzzzzzzzzz"),
            None,
            "overflowing ULID"
        );
        assert_eq!(canonical_id(&"0".repeat(2000)), None);
        assert_eq!(
            resource_id::<IntegrationId>("ABC_1-x")
                .as_ref()
                .map(IntegrationId::as_str),
            Some("ABC_1-x")
        );
        for bad in ["", "a/b", "a b", "é", &"a".repeat(65)] {
            assert!(matches!(
                path_id::<IntegrationId>(bad, "integration"),
                Err(ApiError::NotFound { .. })
            ));
        }
    }

    #[test]
    fn media_types() {
        assert!(is_json_media_type("application/json"));
        assert!(is_json_media_type("Application/JSON; charset=utf-8"));
        assert!(is_json_media_type("application/merge-patch+json"));
        assert!(!is_json_media_type("text/plain"));
    }

    #[test]
    fn page_limits() {
        assert_eq!(page_limit(None).unwrap(), DEFAULT_PAGE);
        assert_eq!(page_limit(Some(100)).unwrap(), 100);
        assert!(page_limit(Some(0)).is_err());
        assert!(page_limit(Some(101)).is_err());
    }
}

#[cfg(test)]
mod cursor_form_tests {
    use super::*;
    use crate::ids::AccountId;

    /// Every string of the id-cursor form (`IdCursor` of `openapi.yaml`) is a position of the
    /// id lists; nothing else is.
    #[test]
    fn every_id_cursor_of_the_documented_form_decodes_and_others_are_refused() {
        let long = "a".repeat(64);
        for good in ["a", "01HZ-x_Y", "-", "_", long.as_str()] {
            let id: Option<AccountId> = cursor_id(Some(good)).unwrap();
            assert_eq!(id.unwrap().as_str(), good);
        }
        let too_long = "a".repeat(65);
        for bad in [
            "",
            "a.b",
            "a~b",
            "a#b",
            "a/b",
            "a b",
            "é",
            "a=",
            too_long.as_str(),
        ] {
            assert!(cursor_id::<AccountId>(Some(bad)).is_err(), "{bad:?}");
        }
    }
}

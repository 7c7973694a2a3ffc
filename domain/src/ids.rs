//! Resource ids: lowercase ULIDs (time-sortable), generated here for the API and the operator
//! actions alike.
//!
//! Each kind of id is its own type, and the compiler refuses one kind where another is meant
//! (these examples must not compile; `cargo test --doc` checks that they do not, with the error
//! each must fail with):
//!
//! ```compile_fail,E0308
//! use domain::ids::{ChangeId, DeliveryId, SubscriptionId};
//! let change: ChangeId = "01HZX3Q4J8K9M0N1P2Q3R4S5T6".parse().unwrap();
//! let subscription: SubscriptionId = "s1".parse().unwrap();
//! DeliveryId::of(&subscription, &subscription);
//! ```
//!
//! nor is text taken for an id without a parse:
//!
//! ```compile_fail,E0277
//! use domain::ids::{ChangeId, DeliveryId};
//! let change: ChangeId = "01HZX3Q4J8K9M0N1P2Q3R4S5T6".parse().unwrap();
//! DeliveryId::of(&change, &"s1".into());
//! ```
//!
//! ```compile_fail,E0308
//! let account: domain::ids::AccountId = "a1".parse().unwrap();
//! let _ = account == "a1";
//! ```
//!
//! ```compile_fail,E0308
//! let account: domain::ids::AccountId = "a1".parse().unwrap();
//! let _: &str = &account;
//! ```
//!
//! while the typed form does:
//!
//! ```
//! use domain::ids::{ChangeId, DeliveryId, SubscriptionId};
//! let change: ChangeId = "01HZX3Q4J8K9M0N1P2Q3R4S5T6".parse().unwrap();
//! let subscription: SubscriptionId = "s1".parse().unwrap();
//! let delivery = DeliveryId::of(&change, &subscription);
//! assert_eq!(delivery.as_str(), "dlv_01HZX3Q4J8K9M0N1P2Q3R4S5T6_s1");
//! ```

/// A new resource id: a ULID in lowercase.
pub fn new_id() -> String {
    ulid::Ulid::new().to_string().to_ascii_lowercase()
}

/// The canonical (lowercase) form of a ULID, or `None` when the text is not one. Case is
/// ignored; anything that does not round-trip exactly is refused.
pub fn canonical_id(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let parsed = ulid::Ulid::from_string(&lower).ok()?;
    let canonical = parsed.to_string().to_ascii_lowercase();
    (canonical == lower).then_some(canonical)
}

/// Longest id accepted from outside (API paths and bodies, stream images, queue bodies).
pub const MAX_ID_LEN: usize = 64;

/// Why a text is not an id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an id is 1 to {MAX_ID_LEN} ASCII letters, digits, '-' or '_'")]
pub struct IdError;

/// Whether `text` has an id's textual form: 1 to [`MAX_ID_LEN`] ASCII letters, digits, `-` or
/// `_`. Ids this code base issues are lowercase ULIDs; ids written by other tools (fixtures,
/// migrations, the upstream change feed) are kept exactly as they are.
pub fn is_id_text(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_ID_LEN
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Declares an id newtype: stored and serialized as its bare text (`serde(transparent)`), shown
/// by `Display`, read as text only through `as_str()`, parsed from outside with `FromStr` (the
/// [`is_id_text`] form, or the kind's own rule) and rebuilt from storage with `from_stored`. There is deliberately no
/// `Deref<Target = str>`, no `From<&str>` and no comparison with text: an id of one kind is not
/// accepted where another kind (or any text) is expected, so the compiler refuses a subscription
/// id passed as an account id.
macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// An id read back from storage (a key attribute, a stored reference) or made by
            /// this code base: text that was an id of this kind when it was written, so it is
            /// not checked again. Text from outside goes through `FromStr`.
            pub fn from_stored(text: impl Into<String>) -> Self {
                $name(text.into())
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
            pub fn into_string(self) -> String {
                self.0
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }
        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
        impl From<&$name> for String {
            fn from(id: &$name) -> String {
                id.0.clone()
            }
        }
    };
}

/// Declares an id newtype ([`id_newtype`]) parsed from outside in the [`is_id_text`] form.
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        id_newtype!($(#[$doc])* $name);
        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(text: &str) -> Result<Self, IdError> {
                is_id_text(text).then(|| $name(text.to_owned())).ok_or(IdError)
            }
        }
        #[cfg(any(test, feature = "fixtures"))]
        impl FixtureId for $name {
            fn fixture(text: &str) -> Self {
                text.parse().expect("a fixture id")
            }
        }
    };
}

/// Declares ids this code base issues: `new()` is their one generator (a lowercase ULID).
macro_rules! issued_id_type {
    ($(#[$doc:meta])* $name:ident) => {
        id_type!($(#[$doc])* $name);
        impl $name {
            /// A new id: a lowercase ULID.
            pub fn new() -> Self {
                $name(new_id())
            }
        }
    };
}

issued_id_type!(
    /// An account (tenant).
    AccountId
);
issued_id_type!(
    /// An integration of an account.
    IntegrationId
);
issued_id_type!(
    /// A subscription of an integration.
    SubscriptionId
);
issued_id_type!(
    /// An API token (its public half).
    TokenId
);
issued_id_type!(
    /// A replay job of the operator console.
    ReplayJobId
);
issued_id_type!(
    /// An audit log entry.
    AuditId
);
id_newtype!(
    /// A change of the upstream feed; it arrives with its id, which parses only in the change
    /// feed's form ([`is_change_id_text`]).
    ChangeId
);

/// Why a text is not a change id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a change id is a ULID: 26 Crockford base32 characters, in one case")]
pub struct ChangeIdError;

/// Whether `text` is a change id as the change feed mints them (`docs/glossary.md`, change): a
/// ULID — 26 Crockford base32 characters of at most 128 bits, so no `#` (the storage keys'
/// separator) — written in one case throughout. Change ids compare bytewise (DynamoDB sort keys,
/// the pull cursor), which is time order only within one case.
pub fn is_change_id_text(text: &str) -> bool {
    let mixed_case = text.bytes().any(|b| b.is_ascii_lowercase())
        && text.bytes().any(|b| b.is_ascii_uppercase());
    !mixed_case && canonical_id(text).is_some()
}

impl std::str::FromStr for ChangeId {
    type Err = ChangeIdError;
    fn from_str(text: &str) -> Result<Self, ChangeIdError> {
        is_change_id_text(text)
            .then(|| ChangeId(text.to_owned()))
            .ok_or(ChangeIdError)
    }
}
id_type!(
    /// An administrator notice; the notice's requester names it.
    NoticeId
);
id_type!(
    /// The stable delivery identifier adapters see (`webhook-id`): one per subscription and
    /// change, made by [`DeliveryId::of`].
    DeliveryId
);

impl DeliveryId {
    /// The delivery of `change` to `subscription`: `dlv_{change}_{subscription}`.
    pub fn of(change: &ChangeId, subscription: &SubscriptionId) -> Self {
        DeliveryId(format!("dlv_{change}_{subscription}"))
    }
}

/// Tests' shorthand for an id of fixture text: `id("s1")` (panics when it is not an id). For this
/// crate's tests and, with the `fixtures` feature, those of the crates above.
#[cfg(any(test, feature = "fixtures"))]
pub fn id<T: FixtureId>(text: &str) -> T {
    T::fixture(text)
}

/// An id kind the unit tests write as fixture text ([`id`]).
#[cfg(any(test, feature = "fixtures"))]
pub trait FixtureId: Sized {
    /// The id of fixture text: parsed as text from outside is, except change ids (below).
    fn fixture(text: &str) -> Self;
}

/// Fixture change ids are short and readable (`"01C"`), not the feed's ULIDs: the tests take them
/// as stored ones (`from_stored`), which are trusted, after the [`is_id_text`] check.
#[cfg(any(test, feature = "fixtures"))]
impl FixtureId for ChangeId {
    fn fixture(text: &str) -> Self {
        assert!(is_id_text(text), "a fixture id: {text:?}");
        ChangeId::from_stored(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn an_issued_id_is_a_canonical_lowercase_ulid_and_parses_back() {
        let id = AccountId::new();
        assert_eq!(canonical_id(id.as_str()).as_deref(), Some(id.as_str()));
        assert_eq!(id.to_string().parse::<AccountId>(), Ok(id.clone()));
        assert_ne!(AccountId::new(), id);
    }

    #[test]
    fn ids_from_outside_must_have_the_id_form() {
        assert_eq!(
            "ABC_1-x".parse::<SubscriptionId>().unwrap().as_str(),
            "ABC_1-x"
        );
        for bad in ["", "a/b", "a b", "é", &"a".repeat(65)] {
            assert_eq!(bad.parse::<IntegrationId>(), Err(IdError), "{bad:?}");
        }
    }

    #[test]
    fn a_change_id_parses_only_as_a_ulid_in_one_case() {
        for good in [
            "01HZX3Q4J8K9M0N1P2Q3R4S5T6",
            "01hzx3q4j8k9m0n1p2q3r4s5t6",
            "00000000000000000000000000",
            "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
        ] {
            assert_eq!(good.parse::<ChangeId>().unwrap().as_str(), good);
        }
        for bad in [
            "",
            "c1",
            "01H",
            "01HZX3Q4J8K9M0N1P2Q3R4S5T",
            "01HZX3Q4J8K9M0N1P2Q3R4S5T6A",
            "01HZX3Q4J8K9M0N1P2Q3R4S5t6",
            "01HZX3Q4J8K9M0N1P2Q3R4S5#6",
            "01HZX3Q4J8K9M0N1P2Q3R4S5U6",
            "01HZX3Q4J8K9M0N1P2Q3R4S5I6",
            "8ZZZZZZZZZZZZZZZZZZZZZZZZZ",
            &"a".repeat(64),
        ] {
            assert_eq!(bad.parse::<ChangeId>(), Err(ChangeIdError), "{bad:?}");
        }
    }

    #[test]
    fn an_id_serializes_as_its_bare_text() {
        let id: IntegrationId = id("i1");
        assert_eq!(serde_json::to_value(&id).unwrap(), serde_json::json!("i1"));
        assert_eq!(
            serde_json::from_value::<IntegrationId>(serde_json::json!("i1")).unwrap(),
            id
        );
        assert_eq!(format!("{id}"), "i1");
        assert_eq!(format!("{id:?}"), "IntegrationId(\"i1\")");
    }

    #[test]
    fn a_map_keyed_by_ids_answers_look_ups_by_id() {
        let map = HashMap::from([(SubscriptionId::from_stored("s1"), 1)]);
        assert_eq!(map.get(&id("s1")), Some(&1));
        assert_eq!(map.get(&id("s2")), None);
        let stored = SubscriptionId::from_stored("s1");
        assert_eq!(stored, "s1".parse().unwrap());
        assert_eq!(stored.as_str(), "s1");
        assert_eq!(String::from(&stored), "s1");
        assert_ne!(stored, id("s2"));
    }

    #[test]
    fn a_delivery_id_is_made_of_its_change_and_subscription() {
        assert_eq!(
            DeliveryId::of(&id("01H"), &id("sub1")).as_str(),
            "dlv_01H_sub1"
        );
    }

    /// The strictness, stated as what the code accepts: text becomes an id only through
    /// `FromStr` (which refuses what is not an id, for every kind alike) or `from_stored`.
    /// (That a wrong kind does not compile is checked by the `compile_fail` examples in the
    /// module docs; that keys built from typed ids keep today's strings, by
    /// `store::key_forms`.)
    #[test]
    fn text_becomes_an_id_only_through_a_checked_parse() {
        for bad in [
            "",
            "a#b",
            "a/b",
            "a b",
            "é",
            "\n",
            &"a".repeat(MAX_ID_LEN + 1),
        ] {
            assert_eq!(bad.parse::<AccountId>(), Err(IdError), "{bad:?}");
            assert_eq!(bad.parse::<SubscriptionId>(), Err(IdError), "{bad:?}");
            assert_eq!(bad.parse::<NoticeId>(), Err(IdError), "{bad:?}");
            assert_eq!(bad.parse::<TokenId>(), Err(IdError), "{bad:?}");
        }
    }
}

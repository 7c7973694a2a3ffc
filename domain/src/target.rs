//! Where an integration's deliveries go. Each delivery method has one shape: a webhook always has
//! its URL and (sealed) signing secret, a built-in integration its handler. The API builds a
//! target from checked input; storage keeps the flat attributes (`method`, `webhook_url`,
//! `sealed_signing_secret`, `previous_signing_secret`, `handler`) and [`Target::from_parts`] reads
//! them back, so the worker matches on the shape and never checks fields again.

use super::delivery_method::DeliveryMethod;
use super::sealed::{PreviousSecret, SealedSecret};
use super::time::Timestamp;
use std::fmt;

/// An integration's delivery target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Push over HTTPS to `url`, signed with `secret` (and its predecessor during a rotation).
    Webhook { url: String, secret: WebhookSecret },
    /// A built-in handler of this code base, by name.
    Internal { handler: String },
    /// The adapter pulls through the cursor API.
    Poll,
    /// A stored method this code base does not know, kept verbatim (say `queue`).
    Unknown(String),
    /// A stored item whose attributes do not fit its method; deliveries to it fail.
    Incomplete(Incomplete),
}

/// What is missing from a stored target. Its `Display` is the reason a delivery attempt fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incomplete {
    /// A webhook without its URL or its secret (whichever is present is kept).
    Webhook {
        url: Option<String>,
        secret: Option<WebhookSecret>,
    },
    /// A built-in integration without a handler name.
    Internal,
}

impl fmt::Display for Incomplete {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Incomplete::Webhook { .. } => "webhook URL or signing secret missing",
            Incomplete::Internal => "internal integration names no handler",
        })
    }
}

/// A webhook's signing secrets as stored: the current one and, for a while after a rotation, the
/// previous one, both sealed (see [`crate::sealed`]); no plaintext is held here, and the
/// `Debug` output shows neither ciphertext nor key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    pub current: SealedSecret,
    /// Boxed: rarely present, and it would double the size of every target.
    pub previous: Option<Box<PreviousSecret>>,
}

impl WebhookSecret {
    /// Only a current secret (a new integration, or a rotation without grace).
    pub fn new(current: SealedSecret) -> Self {
        WebhookSecret {
            current,
            previous: None,
        }
    }

    /// The secrets that sign a message sent at `now`, in header order: the current one first,
    /// then the previous one while its grace lasts.
    pub fn signing_at(&self, now: Timestamp) -> Vec<&SealedSecret> {
        let mut out = vec![&self.current];
        if let Some(p) = self.previous.as_ref().filter(|p| p.signs_at(now)) {
            out.push(&p.sealed);
        }
        out
    }
}

/// A target's stored attributes, flat as they are in the item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetParts {
    pub method: DeliveryMethod,
    pub webhook_url: Option<String>,
    pub signing_secret: Option<WebhookSecret>,
    pub handler: Option<String>,
}

impl Target {
    /// The target stored attributes describe. Attributes that belong to another method are
    /// ignored, as the worker always ignored them.
    pub fn from_parts(parts: TargetParts) -> Target {
        let TargetParts {
            method,
            webhook_url,
            signing_secret,
            handler,
        } = parts;
        match method {
            DeliveryMethod::Webhook => match (webhook_url, signing_secret) {
                (Some(url), Some(secret)) => Target::Webhook { url, secret },
                (url, secret) => Target::Incomplete(Incomplete::Webhook { url, secret }),
            },
            DeliveryMethod::Internal => match handler {
                Some(handler) => Target::Internal { handler },
                None => Target::Incomplete(Incomplete::Internal),
            },
            DeliveryMethod::Poll => Target::Poll,
            DeliveryMethod::Unknown(other) => Target::Unknown(other),
        }
    }

    /// The attributes to store.
    pub fn into_parts(self) -> TargetParts {
        let method = self.delivery_method();
        let (webhook_url, signing_secret, handler) = match self {
            Target::Webhook { url, secret } => (Some(url), Some(secret), None),
            Target::Incomplete(Incomplete::Webhook { url, secret }) => (url, secret, None),
            Target::Internal { handler } => (None, None, Some(handler)),
            Target::Incomplete(Incomplete::Internal) | Target::Poll | Target::Unknown(_) => {
                (None, None, None)
            }
        };
        TargetParts {
            method,
            webhook_url,
            signing_secret,
            handler,
        }
    }

    /// The delivery method alone.
    pub fn delivery_method(&self) -> DeliveryMethod {
        match self {
            Target::Webhook { .. } | Target::Incomplete(Incomplete::Webhook { .. }) => {
                DeliveryMethod::Webhook
            }
            Target::Internal { .. } | Target::Incomplete(Incomplete::Internal) => {
                DeliveryMethod::Internal
            }
            Target::Poll => DeliveryMethod::Poll,
            Target::Unknown(other) => DeliveryMethod::Unknown(other.clone()),
        }
    }

    /// The webhook URL, when the target has one.
    pub fn webhook_url(&self) -> Option<&str> {
        match self {
            Target::Webhook { url, .. } => Some(url),
            Target::Incomplete(Incomplete::Webhook { url, .. }) => url.as_deref(),
            _ => None,
        }
    }

    /// The webhook's signing secrets, when the target has them.
    pub fn webhook_secret(&self) -> Option<&WebhookSecret> {
        match self {
            Target::Webhook { secret, .. } => Some(secret),
            Target::Incomplete(Incomplete::Webhook { secret, .. }) => secret.as_ref(),
            _ => None,
        }
    }

    /// The built-in handler's name, when the target has one.
    pub fn handler(&self) -> Option<&str> {
        match self {
            Target::Internal { handler } => Some(handler),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sealed::{seal, DataKey};
    use crate::signing::SigningSecret;

    fn sealed(byte: u8) -> SealedSecret {
        seal(
            &DataKey::from_slice(&[1; 32]).unwrap(),
            "k1",
            b"wrapped",
            [byte; 12],
            "a1",
            "i1",
            &SigningSecret::from_bytes(&[byte; 32]).unwrap(),
        )
    }

    fn parts(
        method: &str,
        url: Option<&str>,
        secret: Option<&str>,
        handler: Option<&str>,
    ) -> TargetParts {
        TargetParts {
            method: DeliveryMethod::parse(method),
            webhook_url: url.map(str::to_owned),
            signing_secret: secret.map(|s| WebhookSecret::new(sealed(s.len() as u8))),
            handler: handler.map(str::to_owned),
        }
    }

    #[test]
    fn complete_stored_attributes_read_as_their_target_and_store_back_unchanged() {
        for (stored, target) in [
            (
                parts("webhook", Some("https://h.test/"), Some("whsec_x"), None),
                Target::Webhook {
                    url: "https://h.test/".into(),
                    secret: WebhookSecret::new(sealed(7)),
                },
            ),
            (
                parts("internal", None, None, Some("record_snapshot")),
                Target::Internal {
                    handler: "record_snapshot".into(),
                },
            ),
            (parts("poll", None, None, None), Target::Poll),
            (
                parts("queue", None, None, None),
                Target::Unknown("queue".into()),
            ),
        ] {
            let read = Target::from_parts(stored.clone());
            assert_eq!(read, target);
            assert_eq!(read.delivery_method(), stored.method);
            assert_eq!(read.into_parts(), stored);
        }
    }

    #[test]
    fn a_webhook_without_url_or_secret_is_incomplete_and_keeps_what_it_has() {
        let stored = parts("webhook", None, Some("whsec_x"), None);
        let read = Target::from_parts(stored.clone());
        let Target::Incomplete(gap) = &read else {
            panic!("complete: {read:?}")
        };
        assert_eq!(gap.to_string(), "webhook URL or signing secret missing");
        assert_eq!(read.delivery_method(), DeliveryMethod::Webhook);
        assert_eq!(read.clone().into_parts(), stored);

        let no_secret = Target::from_parts(parts("webhook", Some("https://h.test/"), None, None));
        assert_eq!(no_secret.webhook_url(), Some("https://h.test/"));
        assert!(matches!(
            no_secret,
            Target::Incomplete(Incomplete::Webhook { .. })
        ));
    }

    #[test]
    fn an_internal_target_without_handler_is_incomplete() {
        let read = Target::from_parts(parts("internal", None, None, None));
        assert_eq!(read, Target::Incomplete(Incomplete::Internal));
        assert_eq!(
            Incomplete::Internal.to_string(),
            "internal integration names no handler"
        );
        assert_eq!(read.delivery_method(), DeliveryMethod::Internal);
        assert_eq!(read.handler(), None);
    }

    #[test]
    fn attributes_of_another_method_are_ignored() {
        let read = Target::from_parts(parts("poll", Some("https://h.test/"), None, Some("x")));
        assert_eq!(read, Target::Poll);
        assert_eq!(read.webhook_url(), None);
    }

    #[test]
    fn a_secret_never_shows_in_debug_output() {
        let current = sealed(9);
        let target = Target::Webhook {
            url: "https://h.test/".into(),
            secret: WebhookSecret {
                current: current.clone(),
                previous: Some(Box::new(PreviousSecret {
                    sealed: sealed(8),
                    expires_at: Timestamp(5),
                })),
            },
        };
        let shown = format!("{target:?}");
        let plain = SigningSecret::from_bytes(&[9; 32]).unwrap().expose_whsec();
        assert!(!shown.contains(&plain[6..]), "{shown}");
        assert!(
            !shown.contains(&format!("{:?}", current.ciphertext)),
            "{shown}"
        );
        assert!(
            !shown.contains(&format!("{:?}", current.wrapped_key)),
            "{shown}"
        );
        assert!(shown.contains("<sealed>"), "{shown}");
    }

    #[test]
    fn the_previous_secret_signs_after_the_current_one_until_it_expires() {
        let secret = WebhookSecret {
            current: sealed(2),
            previous: Some(Box::new(PreviousSecret {
                sealed: sealed(1),
                expires_at: Timestamp(1_000),
            })),
        };
        assert_eq!(secret.signing_at(Timestamp(999)), [&sealed(2), &sealed(1)]);
        assert_eq!(secret.signing_at(Timestamp(1_000)), [&sealed(2)]);
        assert_eq!(
            WebhookSecret::new(sealed(2)).signing_at(Timestamp(0)),
            [&sealed(2)]
        );
    }
}

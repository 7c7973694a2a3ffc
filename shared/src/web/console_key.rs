//! The console key as the API function holds it: loaded at start and, when it comes from
//! Secrets Manager, read again once [`REFRESH`] has passed, so a rotated key signs (and the
//! old one stops opening) links and sessions within that interval, without a restart. The
//! clock is the caller's: each use passes `now`.

use super::console_session::ConsoleKey;
use crate::domain::time::Timestamp;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a loaded key is used before it is read again.
pub const REFRESH: Duration = Duration::from_secs(5 * 60);

type Loaded = Pin<Box<dyn Future<Output = Result<ConsoleKey, String>> + Send>>;
type Loader = Arc<dyn Fn() -> Loaded + Send + Sync>;

/// The current console key, and how to read it again.
pub struct ConsoleKeys {
    loader: Option<Loader>,
    current: Mutex<(Arc<ConsoleKey>, Timestamp)>,
}

impl std::fmt::Debug for ConsoleKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleKeys")
            .field("reloads", &self.loader.is_some())
            .finish_non_exhaustive()
    }
}

impl ConsoleKeys {
    /// A key that never changes (a configured hex key, the local server's random key).
    pub fn fixed(key: ConsoleKey) -> Self {
        ConsoleKeys {
            loader: None,
            current: Mutex::new((Arc::new(key), Timestamp(0))),
        }
    }

    /// `first`, loaded at `loaded_at`, read again with `loader` every [`REFRESH`].
    pub(crate) fn reloading<F, Fut>(first: ConsoleKey, loaded_at: Timestamp, loader: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ConsoleKey, String>> + Send + 'static,
    {
        ConsoleKeys {
            loader: Some(Arc::new(move || Box::pin(loader()) as Loaded)),
            current: Mutex::new((Arc::new(first), loaded_at)),
        }
    }

    /// In AWS the secret `CONSOLE_SIGNING_KEY_ARN` names (read again every [`REFRESH`]); else
    /// `CONSOLE_SIGNING_KEY`; else a random key of this process.
    pub async fn load(
        secrets_manager: &aws_sdk_secretsmanager::Client,
        lookup: impl Fn(&str) -> Option<String>,
        now: Timestamp,
    ) -> Result<Self, String> {
        if let Some(arn) = lookup("CONSOLE_SIGNING_KEY_ARN").filter(|a| !a.is_empty()) {
            let client = secrets_manager.clone();
            let read = move || {
                let (client, arn) = (client.clone(), arn.clone());
                async move {
                    let text = crate::aws::secret_string(&client, &arn, "the console key").await?;
                    ConsoleKey::from_text(&text).map_err(|e| format!("{arn}: {e}"))
                }
            };
            let first = read().await?;
            return Ok(Self::reloading(first, now, read));
        }
        match lookup("CONSOLE_SIGNING_KEY").filter(|k| !k.is_empty()) {
            Some(text) => ConsoleKey::from_text(&text)
                .map(Self::fixed)
                .map_err(|e| format!("CONSOLE_SIGNING_KEY: {e}")),
            None => {
                tracing::warn!("no console key configured: console links and sessions last as long as this process");
                Ok(Self::fixed(ConsoleKey::random()))
            }
        }
    }

    /// The key to sign and open with at `now`: read again first when [`REFRESH`] has passed
    /// since the last read. A failed read keeps the key it has (and is tried again after the
    /// next interval), so a Secrets Manager hiccup does not sign everyone out.
    pub async fn current(&self, now: Timestamp) -> Arc<ConsoleKey> {
        let due = {
            let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            match &self.loader {
                Some(loader) if now >= current.1.plus(REFRESH) => {
                    // Marked now: concurrent requests keep using the current key meanwhile.
                    current.1 = now;
                    Some(loader.clone())
                }
                _ => return current.0.clone(),
            }
        };
        if let Some(loader) = due {
            match loader().await {
                Ok(key) => {
                    let key = Arc::new(key);
                    let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
                    current.0 = key.clone();
                    return key;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the console key could not be read again; keeping the current one")
                }
            }
        }
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::console_session::{Audience, Grounds};

    #[tokio::test]
    async fn a_rotated_key_takes_effect_within_the_refresh_interval() {
        let stored = Arc::new(Mutex::new(ConsoleKey::random()));
        let reads = Arc::new(Mutex::new(0));
        let source = (stored.clone(), reads.clone());
        let t0 = Timestamp(1_700_000_000_000);
        let first = stored.lock().unwrap().clone();
        let keys = ConsoleKeys::reloading(first, t0, move || {
            let (stored, reads) = source.clone();
            async move {
                *reads.lock().unwrap() += 1;
                Ok(stored.lock().unwrap().clone())
            }
        });
        let audience = Audience::Operator {
            operator_id: "ops".into(),
        };
        let grounds = Grounds::Operator {
            operator_id: "ops".into(),
            expires: None,
        };
        let (old_link, _) = keys.current(t0).await.link(audience.clone(), &grounds, t0);

        // The secret is rotated: until the interval has passed the old key is used, unread.
        *stored.lock().unwrap() = ConsoleKey::random();
        let before = t0.plus(REFRESH - Duration::from_secs(1));
        assert!(keys
            .current(before)
            .await
            .open_link(&old_link, before)
            .is_ok());
        assert_eq!(*reads.lock().unwrap(), 0);

        // Once it has, the new key is read once: the old key's link no longer opens, a new one does.
        let after = t0.plus(REFRESH);
        let key = keys.current(after).await;
        assert!(key.open_link(&old_link, after).is_err());
        let (new_link, _) = key.link(audience, &grounds, after);
        assert!(keys
            .current(after)
            .await
            .open_link(&new_link, after)
            .is_ok());
        assert_eq!(*reads.lock().unwrap(), 1);
    }

    #[tokio::test]
    async fn a_failed_read_keeps_the_current_key() {
        let t0 = Timestamp(1_700_000_000_000);
        let first = ConsoleKey::random();
        let keys = ConsoleKeys::reloading(first.clone(), t0, || async {
            Err::<ConsoleKey, _>("unavailable".to_string())
        });
        let later = t0.plus(REFRESH);
        let audience = Audience::Operator {
            operator_id: "ops".into(),
        };
        let grounds = Grounds::Operator {
            operator_id: "ops".into(),
            expires: None,
        };
        let (link, _) = first.link(audience, &grounds, t0);
        assert!(keys.current(later).await.open_link(&link, later).is_ok());
    }
}

//! The one outbound HTTP client for user-supplied URLs (webhooks, Slack incoming webhooks).
//!
//! SSRF: every address a host resolves to is checked against the [`TargetPolicy`] at connect
//! time, so a DNS answer that changes after the URL was checked (rebinding) cannot reach a private
//! address either. Redirects are not followed (a redirect could point anywhere) and no proxy is
//! used. Callers still check the URL itself with [`crate::domain::ssrf::check_url`] (IP literals
//! never reach a resolver).
//!
//! A hostile receiver cannot exhaust the caller either:
//! - time: the client's timeout is a total deadline, from connecting until the response body is
//!   read (reqwest carries it onto the body), so connect + head + body fit in it;
//! - the response head: the client speaks HTTP/1 only (reqwest's `http2` feature is off) and
//!   hyper refuses a head larger than its read buffer (about 400 KiB) or with more than 100
//!   headers ("message head is too large"), before any of it becomes a `HeaderMap`;
//! - the body: [`read_capped`] reads chunk by chunk and stops at the cap; dropping the response
//!   then closes the connection (hyper pools only connections whose body was read to the end).

use crate::domain::ssrf::{check_resolved, TargetPolicy};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The error of a resolution whose every address the policy refuses.
#[derive(Debug, thiserror::Error)]
#[error("target refused: {0}")]
pub struct ForbiddenTarget(pub String);

/// The refusal in `error` or one of its causes, if the call failed on the SSRF policy.
pub fn refusal(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source = Some(error);
    while let Some(err) = source {
        if let Some(forbidden) = err.downcast_ref::<ForbiddenTarget>() {
            return Some(forbidden.to_string());
        }
        source = err.source();
    }
    None
}

/// The error and its causes on one line (reqwest's own message is terse).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(err) = source {
        text.push_str(": ");
        text.push_str(&err.to_string());
        source = err.source();
    }
    text
}

/// At most `cap` bytes of the response's body (ask for one more than you keep to learn whether
/// it went on). Reads
/// chunk by chunk (a chunk is at most hyper's read buffer), so no more than the cap and one chunk
/// are ever held; stops at the cap and drops the response, closing the connection. A body that
/// fails midway (the total timeout, a reset) ends what was read.
pub(crate) async fn read_capped(mut response: reqwest::Response, cap: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            break;
        }
        body.extend_from_slice(&chunk);
    }
    body
}

/// A resolver that drops every address the policy refuses.
struct GuardedResolver {
    policy: TargetPolicy,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refusal = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|a| match check_resolved(a.ip(), &policy) {
                    Ok(()) => true,
                    Err(e) => {
                        refusal = Some(e.to_string());
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                let why = refusal.unwrap_or_else(|| format!("{host} has no address"));
                return Err(
                    Box::new(ForbiddenTarget(why)) as Box<dyn std::error::Error + Send + Sync>
                );
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// A client with the SSRF-guarded resolver, no redirects, no proxy, and the given timeout.
pub fn client(
    policy: TargetPolicy,
    timeout: Duration,
    user_agent: &'static str,
) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(user_agent)
        .dns_resolver(Arc::new(GuardedResolver { policy }))
        .build()
        .expect("the guarded client's settings are valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn loopback_client(timeout: Duration) -> reqwest::Client {
        let policy = TargetPolicy {
            allow_private: true,
            require_https: false,
        };
        client(policy, timeout, "test")
    }

    /// A raw HTTP/1 server on loopback that answers one request with `head`, then writes `body`
    /// chunks (each after `every`) until they run out or the connection fails. Yields its URL
    /// and, when it is done, the body bytes it managed to write.
    async fn hostile_server(
        head: Vec<u8>,
        chunk: Vec<u8>,
        chunks: usize,
        every: Duration,
    ) -> (String, tokio::task::JoinHandle<usize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request).await;
            if stream.write_all(&head).await.is_err() {
                return 0;
            }
            let mut written = 0;
            for _ in 0..chunks {
                tokio::time::sleep(every).await;
                if stream.write_all(&chunk).await.is_err() {
                    break;
                }
                written += chunk.len();
            }
            written
        });
        (url, task)
    }

    /// A receiver that would stream 100 MiB: the client keeps the cap, closes the connection, and
    /// the receiver's writes fail long before it is done.
    #[tokio::test]
    async fn an_endless_body_is_read_up_to_the_cap_and_the_connection_closed() {
        const HUNDRED_MIB: usize = 100 << 20;
        let head =
            format!("HTTP/1.1 500 Internal Server Error\r\ncontent-length: {HUNDRED_MIB}\r\n\r\n");
        let (url, server) = hostile_server(
            head.into_bytes(),
            vec![b'x'; 64 << 10],
            HUNDRED_MIB / (64 << 10),
            Duration::from_millis(1),
        )
        .await;
        let response = loopback_client(Duration::from_secs(10))
            .post(url)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 500);
        let body = read_capped(response, 1000).await;
        assert_eq!(body.len(), 1000);
        let written = tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the receiver's writes fail once the client has closed")
            .unwrap();
        // What the kernel's socket buffers took before the close, not the hundred MiB.
        assert!(written < 32 << 20, "the receiver wrote {written} bytes");
    }

    /// A slow body cannot stretch an attempt: the client's timeout ends the whole exchange, and
    /// what arrived before it is kept.
    #[tokio::test]
    async fn the_timeout_bounds_connect_head_and_body_together() {
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n".to_vec();
        let (url, _server) =
            hostile_server(head, b"y".to_vec(), 1000, Duration::from_millis(100)).await;
        let started = Instant::now();
        let response = loopback_client(Duration::from_millis(700))
            .post(url)
            .send()
            .await
            .unwrap();
        let body = read_capped(response, 1000).await;
        let took = started.elapsed();
        assert!(took < Duration::from_millis(1500), "took {took:?}");
        assert!(
            !body.is_empty() && body.len() < 20,
            "{} bytes arrived",
            body.len()
        );
    }

    /// A head larger than hyper's read buffer, or with too many headers, is refused before it is
    /// parsed into headers: the call fails with hyper's error.
    #[tokio::test]
    async fn an_oversized_response_head_is_refused() {
        let big = format!("x-big: {}\r\n", "h".repeat(4096)).repeat(200);
        let many: String = (0..200).map(|i| format!("x-h{i}: v\r\n")).collect();
        for headers in [big, many] {
            let head = format!("HTTP/1.1 200 OK\r\n{headers}content-length: 0\r\n\r\n");
            let (url, _server) =
                hostile_server(head.into_bytes(), Vec::new(), 0, Duration::ZERO).await;
            let err = loopback_client(Duration::from_secs(5))
                .post(url)
                .send()
                .await
                .expect_err("the head is refused");
            let text = error_chain(&err);
            assert!(text.contains("message head is too large"), "{text}");
        }
    }

    /// A name that resolves to a forbidden address is refused at connect time, even when the URL
    /// check was skipped (or the DNS answer changed after it): the rebinding guard.
    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_at_connect_time() {
        let guarded = client(
            TargetPolicy {
                allow_private: false,
                require_https: false,
            },
            Duration::from_secs(2),
            "test",
        );
        let err = guarded
            .get("http://localhost:9/")
            .send()
            .await
            .expect_err("loopback is refused");
        let why = refusal(&err).expect("the refusal is reported as such");
        assert!(why.contains("127.0.0.1") || why.contains("::1"), "{why}");
    }
}

//! The router's route table, read back from the router itself: every `(method, path)` it
//! serves. `local/tests/it/openapi.rs` compares it with `openapi.yaml` (both ways), so a route added
//! to any `router()` without its documentation — or documented without being served — fails the
//! tests.
//!
//! axum does not expose its routes, but its `Debug` rendering of a [`Router`] names, for each
//! route id, the path (`Node { paths: {RouteId(n): "/path"} }`) and the methods its method router
//! answers (`MethodRouter { … allow_header: Bytes(b"GET,HEAD,POST") }`). [`routes`] parses that
//! (pinned to axum 0.8 by the workspace) and refuses to guess when the rendering changes shape:
//! it returns an error rather than a partial table. `HEAD` (which axum adds to every `GET`) is
//! left out, as OpenAPI leaves it out.

use axum::http::Method;
use axum::Router;
use std::collections::BTreeMap;

/// Why the route table could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the router's route table could not be read: {0} (has axum's Debug output changed?)")]
pub struct RouteTableError(pub &'static str);

/// Every `(method, path)` of the JSON API the router serves, sorted by path then method. Paths
/// are axum's (`/v1/subscriptions/{subscription_id}`), which are also OpenAPI's.
///
/// The web console's HTML pages (`/console`, `/console/…`, [`crate::web::console_signin::CONSOLE_PREFIX`]) are left
/// out on purpose: they are pages for a browser, not operations of the JSON API, and
/// `openapi.yaml` does not describe them (the console's JSON link routes, under `/operator/` and
/// `/v1/`, are in the table and the spec like every other route).
pub fn routes(router: &Router) -> Result<Vec<(Method, String)>, RouteTableError> {
    let mut table = parse(&format!("{router:?}"))?;
    table.retain(|(_, path)| !is_console_page(path));
    Ok(table)
}

fn is_console_page(path: &str) -> bool {
    let prefix = crate::web::console_signin::CONSOLE_PREFIX;
    path == prefix || path.starts_with(&format!("{prefix}/"))
}

fn parse(text: &str) -> Result<Vec<(Method, String)>, RouteTableError> {
    let start = text
        .find("path_router: PathRouter { routes: {")
        .ok_or(RouteTableError("no path router"))?;
    let text = &text[start..];
    let node = text
        .find("node: Node { paths: {")
        .ok_or(RouteTableError("no path node"))?;
    let (routes_part, node_part) = text.split_at(node);

    // Route id → methods.
    let mut methods: BTreeMap<u32, Vec<Method>> = BTreeMap::new();
    let mut rest = routes_part;
    while let Some(at) = rest.find("RouteId(") {
        rest = &rest[at + "RouteId(".len()..];
        let (id, after) = number(rest)?;
        rest = after;
        let Some(after) = rest.strip_prefix("): MethodRouter(") else {
            continue;
        };
        let header_at = after
            .find("allow_header: ")
            .ok_or(RouteTableError("a method router without allow_header"))?;
        let header = &after[header_at + "allow_header: ".len()..];
        let list = if let Some(bytes) = header.strip_prefix("Bytes(b\"") {
            let end = bytes
                .find('"')
                .ok_or(RouteTableError("unterminated allow header"))?;
            &bytes[..end]
        } else {
            return Err(RouteTableError("a route without allowed methods"));
        };
        let mut ms = Vec::new();
        for name in list.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            let m = Method::from_bytes(name.as_bytes())
                .map_err(|_| RouteTableError("an unknown method"))?;
            if m != Method::HEAD {
                ms.push(m);
            }
        }
        methods.insert(id, ms);
        rest = &after[header_at..];
    }

    // Route id → path.
    let mut paths: BTreeMap<u32, String> = BTreeMap::new();
    let mut rest = &node_part["node: Node { paths: {".len()..];
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        if rest.starts_with('}') {
            break;
        }
        rest = rest
            .strip_prefix("RouteId(")
            .ok_or(RouteTableError("unexpected text in the path node"))?;
        let (id, after) = number(rest)?;
        rest = after
            .strip_prefix("): \"")
            .ok_or(RouteTableError("a path that is not a string"))?;
        let end = rest.find('"').ok_or(RouteTableError("unterminated path"))?;
        paths.insert(id, rest[..end].to_owned());
        rest = &rest[end + 1..];
    }

    if paths.is_empty() || paths.len() != methods.len() {
        return Err(RouteTableError("route ids and paths do not match"));
    }
    let mut out = Vec::new();
    for (id, path) in paths {
        let ms = methods
            .get(&id)
            .ok_or(RouteTableError("a path without a method router"))?;
        for m in ms {
            out.push((m.clone(), path.clone()));
        }
    }
    out.sort_by(|a, b| (&a.1, a.0.as_str()).cmp(&(&b.1, b.0.as_str())));
    Ok(out)
}

fn number(text: &str) -> Result<(u32, &str), RouteTableError> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let n = text[..digits]
        .parse()
        .map_err(|_| RouteTableError("a route id that is not a number"))?;
    Ok((n, &text[digits..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::router;
    use crate::web::{ApiState, OperatorAuth};

    fn app() -> Router {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .build();
        let config = crate::config::Config::from_lookup(|name| match name {
            "ALLOW_PRIVATE_TARGETS"
            | "NOTICE_DAILY_RECIPIENT_QUOTA"
            | "ACCOUNT_MAX_INTEGRATIONS"
            | "ACCOUNT_MAX_SUBSCRIPTIONS"
            | "ACCOUNT_MAX_LIVE_TOKENS"
            | "ACCOUNT_MAX_REQUESTS_PER_SECOND" => None,
            other => Some(format!("unused-{other}")),
        })
        .unwrap();
        router(ApiState::new(
            crate::aws::Clients::new(&sdk),
            config,
            std::sync::Arc::new(crate::clock::SystemClock),
            OperatorAuth::static_token("t", "op"),
        ))
    }

    #[test]
    fn the_route_table_names_every_method_of_every_path() {
        let table = routes(&app()).unwrap();
        let has = |m: Method, p: &str| table.iter().any(|(tm, tp)| *tm == m && tp == p);
        assert!(has(Method::GET, "/health"));
        assert!(has(Method::PATCH, "/v1/subscriptions/{subscription_id}"));
        assert!(has(Method::DELETE, "/v1/subscriptions/{subscription_id}"));
        assert!(has(
            Method::PUT,
            "/v1/pull/subscriptions/{subscription_id}/cursor"
        ));
        assert!(has(
            Method::POST,
            "/operator/accounts/{account_id}/subscriptions/{subscription_id}/deliveries/{change_id}/retry"
        ));
        assert!(!table.iter().any(|(m, _)| *m == Method::HEAD));
        assert!(has(Method::POST, "/operator/console-links"));
        assert!(!table.iter().any(|(_, p)| is_console_page(p)));
        assert!(!is_console_page("/consoles") && is_console_page("/console/op"));
        assert!(!table.iter().any(|(_, p)| p.contains("__private__")));
        let mut sorted = table.clone();
        sorted.dedup();
        assert_eq!(sorted.len(), table.len());
    }

    #[test]
    fn an_unexpected_rendering_is_an_error_not_a_guess() {
        assert!(parse("Router { something else }").is_err());
        assert!(parse("path_router: PathRouter { routes: {}, node: Node { paths: {} } }").is_err());
    }
}

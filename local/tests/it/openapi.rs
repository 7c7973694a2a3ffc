//! `openapi.yaml` is kept true by comparing it with the router: every route the router serves
//! (read back with `shared::api::routes::routes`) is documented with the same path and method,
//! and every documented operation is served. Each operation also documents its auth and its
//! errors (problem+json), every `$ref` resolves, every path parameter is declared, and each
//! secured route really refuses a request without credentials (`401`, problem+json, a Bearer
//! challenge) on the emulator-backed router.

use axum::http::{header, Method, StatusCode};
use local::testkit::api::PROBLEM_JSON;
use local::testkit::World;
use serde_json::json;
use serde_yaml::Value;
use std::collections::BTreeSet;

const METHODS: &[&str] = &[
    "get", "put", "post", "patch", "delete", "head", "options", "trace",
];

fn spec() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.yaml");
    let text = std::fs::read_to_string(path).expect("openapi.yaml at the repository root");
    serde_yaml::from_str(&text).expect("openapi.yaml is YAML")
}

fn documented(spec: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in spec["paths"].as_mapping().expect("paths") {
        for (key, _) in item.as_mapping().expect("a path item") {
            let key = key.as_str().unwrap();
            if METHODS.contains(&key) {
                out.insert((key.to_ascii_uppercase(), path.as_str().unwrap().to_owned()));
            }
        }
    }
    out
}

/// Follows a local `$ref` (`#/components/...`).
fn resolve<'a>(spec: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let mut at = spec;
            for part in r.trim_start_matches("#/").split('/') {
                at = &at[part];
            }
            assert!(!at.is_null(), "unresolved $ref {r}");
            resolve(spec, at)
        }
        None => v,
    }
}

fn all_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                if k.as_str() == Some("$ref") {
                    out.push(v.as_str().unwrap_or_default().to_owned());
                } else {
                    all_refs(v, out);
                }
            }
        }
        Value::Sequence(s) => s.iter().for_each(|v| all_refs(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn openapi_documents_exactly_the_routes_the_router_serves() {
    let spec = spec();
    assert_eq!(spec["openapi"].as_str(), Some("3.1.0"));
    let w = World::new().await;
    let served: BTreeSet<(String, String)> = shared::api::routes::routes(w.api.router())
        .expect("the route table")
        .into_iter()
        .map(|(m, p)| (m.as_str().to_owned(), p))
        .collect();
    let documented = documented(&spec);
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty() && unserved.is_empty(),
        "openapi.yaml and the router disagree.\n  served but not documented: {undocumented:#?}\n  documented but not served: {unserved:#?}"
    );
    // The table is not trivially empty (and holds both families of routes).
    assert!(served.len() >= 30, "{served:#?}");
    assert!(served.contains(&(
        "PUT".into(),
        "/v1/pull/subscriptions/{subscription_id}/cursor".into()
    )));
}

#[test]
fn every_operation_documents_its_auth_errors_and_parameters() {
    let spec = spec();
    let mut refs = Vec::new();
    all_refs(&spec, &mut refs);
    for r in &refs {
        assert!(r.starts_with("#/components/"), "non-local $ref {r}");
        resolve(
            &spec,
            &serde_yaml::to_value(std::collections::BTreeMap::from([("$ref", r.as_str())]))
                .unwrap(),
        );
    }
    let global_security = spec["security"].clone();
    for (path, item) in spec["paths"].as_mapping().unwrap() {
        let path = path.as_str().unwrap();
        let template_params: BTreeSet<String> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(str::to_owned)
            .collect();
        let path_level: Vec<Value> = item
            .get("parameters")
            .and_then(Value::as_sequence)
            .cloned()
            .unwrap_or_default();
        for (key, op) in item.as_mapping().unwrap() {
            let method = key.as_str().unwrap();
            if !METHODS.contains(&method) {
                continue;
            }
            let name = format!("{} {path}", method.to_ascii_uppercase());
            assert!(op["summary"].is_string(), "{name}: no summary");
            // Path parameters: exactly the template's, declared `in: path` and required.
            let mut declared = BTreeSet::new();
            for p in path_level.iter().chain(
                op.get("parameters")
                    .and_then(Value::as_sequence)
                    .into_iter()
                    .flatten(),
            ) {
                let p = resolve(&spec, p);
                if p["in"].as_str() == Some("path") {
                    assert_eq!(
                        p["required"].as_bool(),
                        Some(true),
                        "{name}: {:?}",
                        p["name"]
                    );
                    declared.insert(p["name"].as_str().unwrap().to_owned());
                }
            }
            assert_eq!(declared, template_params, "{name}: path parameters");
            // Responses: a success, and every error as problem+json.
            let responses = op["responses"]
                .as_mapping()
                .unwrap_or_else(|| panic!("{name}: no responses"));
            let codes: Vec<String> = responses
                .keys()
                .map(|k| {
                    k.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| format!("{}", k.as_u64().unwrap()))
                })
                .collect();
            assert!(
                codes.iter().any(|c| c.starts_with('2')),
                "{name}: no success response"
            );
            for (code, response) in responses {
                let code = code.as_str().map(str::to_owned).unwrap_or_default();
                let response = resolve(&spec, response);
                assert!(
                    response["description"].is_string(),
                    "{name} {code}: no description"
                );
                if code.starts_with('4') || code.starts_with('5') {
                    let problem = &response["content"]["application/problem+json"]["schema"];
                    assert_eq!(
                        problem.get("$ref").and_then(Value::as_str),
                        Some("#/components/schemas/Problem"),
                        "{name} {code}: errors are problem+json"
                    );
                }
            }
            // Auth: declared (or inherited), and a secured operation documents its 401.
            let security = op
                .get("security")
                .cloned()
                .unwrap_or(global_security.clone());
            let secured = security.as_sequence().is_some_and(|s| !s.is_empty());
            if secured {
                assert!(
                    codes.iter().any(|c| c == "401"),
                    "{name}: secured but no 401"
                );
                // An account's credentials count against its request rate: their 429.
                let by_token = security.as_sequence().unwrap().iter().any(|r| {
                    r.as_mapping().unwrap().keys().any(|k| {
                        matches!(
                            k.as_str(),
                            Some("accountToken" | "integrationToken" | "publishToken")
                        )
                    })
                });
                if by_token {
                    let answer = responses
                        .iter()
                        .find(|(k, _)| k.as_str() == Some("429"))
                        .map(|(_, r)| resolve(&spec, r))
                        .unwrap_or_else(|| panic!("{name}: a token's route without its 429"));
                    assert!(
                        answer["description"]
                            .as_str()
                            .is_some_and(|d| d.contains("rate-limited")),
                        "{name}: its 429 does not name the account's rate"
                    );
                    assert!(
                        !answer["headers"]["Retry-After"].is_null(),
                        "{name}: 429 without Retry-After"
                    );
                }
                for requirement in security.as_sequence().unwrap() {
                    for scheme in requirement.as_mapping().unwrap().keys() {
                        let scheme = scheme.as_str().unwrap();
                        assert!(
                            !spec["components"]["securitySchemes"][scheme].is_null(),
                            "{name}: unknown security scheme {scheme}"
                        );
                    }
                }
                // The families of routes use their own credentials.
                let schemes: Vec<String> = security
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .flat_map(|r| {
                        r.as_mapping()
                            .unwrap()
                            .keys()
                            .map(|k| k.as_str().unwrap().to_owned())
                    })
                    .collect();
                if path.starts_with("/operator/") {
                    assert!(
                        schemes.iter().all(|s| s.starts_with("operator")),
                        "{name}: {schemes:?}"
                    );
                    // A token without the operator scope.
                    assert!(
                        codes.iter().any(|c| c == "403"),
                        "{name}: operator route without its 403"
                    );
                }
                if path.starts_with("/v1/pull/") {
                    assert_eq!(schemes, ["integrationToken"], "{name}");
                }
            } else {
                // Without a bearer scheme: /health, and routes that authenticate by a signature
                // of the request (provider events), which say so.
                assert!(
                    path == "/health" || op["x-authentication"].is_string(),
                    "{name}: unauthenticated without an `x-authentication` explanation"
                );
            }
        }
    }
}

#[tokio::test]
async fn every_documented_secured_route_refuses_a_request_without_credentials() {
    let spec = spec();
    let w = World::new().await;
    for (method, path) in documented(&spec) {
        let concrete: String = path
            .split('/')
            .map(|seg| {
                if seg.starts_with('{') {
                    "01HZX3Q4J8K9M0N1P2Q3R4S5T6"
                } else {
                    seg
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let body = matches!(method.as_str(), "POST" | "PUT" | "PATCH").then(|| json!({}));
        let response = w
            .api
            .call(
                Method::from_bytes(method.as_bytes()).unwrap(),
                &concrete,
                None,
                body,
            )
            .await;
        if path == "/health" {
            assert_eq!(response.status, StatusCode::OK);
            continue;
        }
        let signed = spec["paths"][path.as_str()][method.to_ascii_lowercase().as_str()]
            ["x-authentication"]
            .is_string();
        if signed {
            // Authenticated by a signature of the request: refused, and by the route itself
            // (not the router's fallbacks).
            let (status, text) = (response.status, &response.text);
            assert!(status.is_client_error(), "{method} {path}: {status}");
            assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
            assert!(
                !text.contains("no route matches"),
                "{method} {path}: {text}"
            );
            continue;
        }
        assert_eq!(response.status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert_eq!(
            response.header(header::CONTENT_TYPE.as_str()),
            Some(PROBLEM_JSON),
            "{method} {path}"
        );
        assert!(
            response.headers.contains_key(header::WWW_AUTHENTICATE),
            "{method} {path}"
        );
    }
}

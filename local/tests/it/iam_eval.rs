//! A small evaluator of the IAM policy language, for the subset `deploy/deploy-role.yaml` and
//! `template.yaml` use, and a resolver of CloudFormation's intrinsic functions for the same
//! subset, so `deploy_role.rs` can ask what a role of a deployed stack may do. Evaluation as AWS
//! does it within one account: an explicit Deny wins, otherwise some Allow must match; a
//! permissions boundary must allow as well. Statements: Effect, Action or NotAction, Resource or
//! NotResource (wildcards `*` and `?`), Condition with the String/Arn/Bool/Null operators, their
//! IfExists forms and the ForAllValues/ForAnyValue set qualifiers. Principals are not evaluated
//! (the tests ask of one role's policies at a time). Its own tests below keep it honest.

use serde_json::{json, Map, Value as Json};
use serde_yaml::Value;
use std::collections::BTreeMap;

// ------------------------------------------------------------------------- requests

/// One authorisation request: an action on a resource with its request context.
#[derive(Clone, Debug)]
pub struct Request {
    pub action: String,
    pub resource: String,
    pub context: BTreeMap<String, Vec<String>>,
}

impl Request {
    pub fn new(action: &str, resource: &str) -> Self {
        Request {
            action: action.to_string(),
            resource: resource.to_string(),
            context: BTreeMap::new(),
        }
    }

    /// The same request with `key` set to `values` in its context.
    pub fn with(mut self, key: &str, values: &[&str]) -> Self {
        self.context.insert(
            key.to_string(),
            values.iter().map(|v| v.to_string()).collect(),
        );
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    ImplicitDeny,
    ExplicitDeny,
}

// ------------------------------------------------------------------------- matching

/// `*` and `?` wildcards, as IAM matches actions, resources and the *Like operators.
pub fn like(pattern: &str, value: &str) -> bool {
    fn go(p: &[u8], v: &[u8]) -> bool {
        match (p.first(), v.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], v) || (!v.is_empty() && go(p, &v[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &v[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &v[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), value.as_bytes())
}

fn texts(v: &Json) -> Vec<String> {
    match v {
        Json::Array(items) => items.iter().flat_map(texts).collect(),
        Json::String(s) => vec![s.clone()],
        Json::Null => Vec::new(),
        other => vec![other.to_string()],
    }
}

fn action_matches(pattern: &str, action: &str) -> bool {
    like(&pattern.to_ascii_lowercase(), &action.to_ascii_lowercase())
}

/// Whether one condition operator (`StringEquals`, `ForAllValues:StringLike`,
/// `ArnLikeIfExists`, `Null`, ...) holds for `key` against the policy's `wanted` values.
fn operator_holds(operator: &str, key: &str, wanted: &[String], request: &Request) -> bool {
    let given = request.context.get(key);
    if operator == "Null" {
        let absent = given.is_none_or(|v| v.is_empty());
        return wanted.iter().any(|w| (w == "true") == absent);
    }
    let (set, rest) = match operator.split_once(':') {
        Some((set, rest)) => (Some(set), rest),
        None => (None, operator),
    };
    let (base, if_exists) = match rest.strip_suffix("IfExists") {
        Some(base) => (base, true),
        None => (rest, false),
    };
    let negated = base.contains("Not");
    let matcher: fn(&str, &str) -> bool = match base {
        "StringEquals" | "StringNotEquals" => |w, g| w == g,
        "StringEqualsIgnoreCase" => |w, g| w.eq_ignore_ascii_case(g),
        "StringLike" | "StringNotLike" | "ArnLike" | "ArnNotLike" | "ArnEquals"
        | "ArnNotEquals" => like,
        "Bool" => |w, g| w.eq_ignore_ascii_case(g),
        other => panic!("the evaluator does not know the condition operator {other}"),
    };
    let Some(given) = given.filter(|v| !v.is_empty()) else {
        // Absent: IfExists and ForAllValues hold, negated operators hold, the others fail.
        return if_exists || set == Some("ForAllValues") || (negated && set.is_none());
    };
    let one = |g: &str| wanted.iter().any(|w| matcher(w, g));
    match set {
        Some("ForAllValues") => given.iter().all(|g| one(g) != negated),
        Some("ForAnyValue") => given.iter().any(|g| one(g) != negated),
        Some(other) => panic!("unknown set qualifier {other}"),
        None if negated => !given.iter().any(|g| one(g)),
        None => given.iter().any(|g| one(g)),
    }
}

fn conditions_hold(condition: &Json, request: &Request) -> bool {
    let Some(operators) = condition.as_object() else {
        return true;
    };
    operators.iter().all(|(operator, keys)| {
        keys.as_object()
            .expect("a condition operator maps keys to values")
            .iter()
            .all(|(key, wanted)| operator_holds(operator, key, &texts(wanted), request))
    })
}

/// Whether a statement applies to the request (its effect aside).
pub fn statement_matches(s: &Json, request: &Request) -> bool {
    let action = match (&s["Action"], &s["NotAction"]) {
        (Json::Null, not) => !texts(not)
            .iter()
            .any(|p| action_matches(p, &request.action)),
        (yes, _) => texts(yes)
            .iter()
            .any(|p| action_matches(p, &request.action)),
    };
    let resource = match (&s["Resource"], &s["NotResource"]) {
        (Json::Null, Json::Null) => true, // trust policies name no resource
        (Json::Null, not) => !texts(not).iter().any(|p| like(p, &request.resource)),
        (yes, _) => texts(yes).iter().any(|p| like(p, &request.resource)),
    };
    action && resource && conditions_hold(&s["Condition"], request)
}

/// The decision of a set of statements (one or more policies of one principal).
pub fn decide(statements: &[Json], request: &Request) -> Decision {
    let applying: Vec<&Json> = statements
        .iter()
        .filter(|s| statement_matches(s, request))
        .collect();
    if applying.iter().any(|s| s["Effect"] == "Deny") {
        Decision::ExplicitDeny
    } else if applying.iter().any(|s| s["Effect"] == "Allow") {
        Decision::Allowed
    } else {
        Decision::ImplicitDeny
    }
}

/// What a role with `identity` policies and the permissions `boundary` may do: both must allow.
pub fn decide_bounded(identity: &[Json], boundary: &[Json], request: &Request) -> Decision {
    match (decide(identity, request), decide(boundary, request)) {
        (Decision::ExplicitDeny, _) | (_, Decision::ExplicitDeny) => Decision::ExplicitDeny,
        (Decision::Allowed, Decision::Allowed) => Decision::Allowed,
        _ => Decision::ImplicitDeny,
    }
}

// ------------------------------------------------------------------- intrinsics

/// YAML with short-form tags (`!Ref`, `!Sub`, `!GetAtt`, `!If`, ...) in the JSON long form
/// (`{"Ref": ..}`, `{"Fn::Sub": ..}`), so both templates resolve through [`Stack::resolve`].
pub fn long_form(v: &Value) -> Json {
    match v {
        Value::Tagged(t) => {
            let tag = t.tag.to_string();
            let inner = long_form(&t.value);
            match tag.trim_start_matches('!') {
                "Ref" => json!({ "Ref": inner }),
                "GetAtt" => {
                    let text = inner.as_str().expect("!GetAtt X.Attribute");
                    let (id, attribute) = text.split_once('.').expect("!GetAtt X.Attribute");
                    json!({ "Fn::GetAtt": [id, attribute] })
                }
                other => json!({ format!("Fn::{other}"): inner }),
            }
        }
        Value::Mapping(m) => Json::Object(
            m.iter()
                .map(|(k, v)| (k.as_str().expect("string keys").to_string(), long_form(v)))
                .collect(),
        ),
        Value::Sequence(items) => Json::Array(items.iter().map(long_form).collect()),
        Value::String(s) => Json::String(s.clone()),
        Value::Bool(b) => Json::Bool(*b),
        Value::Number(n) => serde_json::to_value(n).expect("a number"),
        Value::Null => Json::Null,
    }
}

/// A deployed stack as far as its intrinsics need it: parameter values, its conditions, and the
/// values `Ref` and `Fn::GetAtt` give for its resources.
pub struct Stack {
    pub params: BTreeMap<String, String>,
    pub conditions: Json,
    /// `X` → what `Ref X` gives; `X.Attr` → what `Fn::GetAtt [X, Attr]` gives.
    pub values: BTreeMap<String, String>,
    pub account: String,
    pub region: String,
}

impl Stack {
    fn lookup(&self, name: &str) -> Option<String> {
        match name {
            "AWS::Partition" => Some("aws".into()),
            "AWS::Region" => Some(self.region.clone()),
            "AWS::AccountId" => Some(self.account.clone()),
            "AWS::StackName" => self.params.get("AWS::StackName").cloned(),
            "AWS::NoValue" => None,
            _ => Some(
                self.params
                    .get(name)
                    .or_else(|| self.values.get(name))
                    .unwrap_or_else(|| panic!("nothing resolves {name}"))
                    .clone(),
            ),
        }
    }

    pub fn condition(&self, c: &Json) -> bool {
        let (f, args) = c
            .as_object()
            .and_then(|o| o.iter().next())
            .expect("a condition function");
        let args: Vec<&Json> = args
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_else(|| vec![args]);
        match f.as_str() {
            "Fn::Equals" => self.resolve(args[0]) == self.resolve(args[1]),
            "Fn::Not" => !self.condition(args[0]),
            "Fn::And" => args.iter().all(|a| self.condition(a)),
            "Fn::Or" => args.iter().any(|a| self.condition(a)),
            "Condition" => self.named_condition(args[0].as_str().unwrap()),
            other => panic!("no condition function {other}"),
        }
    }

    pub fn named_condition(&self, name: &str) -> bool {
        let c = &self.conditions[name];
        assert!(!c.is_null(), "no condition {name}");
        self.condition(c)
    }

    fn substitute(&self, text: &str, vars: &Map<String, Json>) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find('}').expect("closing brace") + start;
            let name = &rest[start + 2..end];
            let value = match vars.get(name) {
                Some(v) => self.resolve(v).and_then(|v| v.as_str().map(String::from)),
                None => self.lookup(name),
            };
            out.push_str(&value.unwrap_or_else(|| panic!("${{{name}}} resolves to nothing")));
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// The value of a (long-form) template fragment; `None` for `AWS::NoValue`.
    pub fn resolve(&self, v: &Json) -> Option<Json> {
        match v {
            Json::Array(items) => Some(Json::Array(
                items.iter().filter_map(|i| self.resolve(i)).collect(),
            )),
            Json::Object(o) if o.len() == 1 => {
                let (f, arg) = o.iter().next().unwrap();
                self.function(f, arg)
                    .unwrap_or_else(|| Some(Json::Object(self.fields(o))))
            }
            Json::Object(o) => Some(Json::Object(self.fields(o))),
            other => Some(other.clone()),
        }
    }

    fn fields(&self, o: &Map<String, Json>) -> Map<String, Json> {
        o.iter()
            .filter_map(|(k, v)| self.resolve(v).map(|v| (k.clone(), v)))
            .collect()
    }

    /// `Some(value)` when `f` is an intrinsic function, `None` when it is a plain key.
    fn function(&self, f: &str, arg: &Json) -> Option<Option<Json>> {
        let string = |s: String| Some(Json::String(s));
        Some(match f {
            "Ref" => self.lookup(arg.as_str().unwrap()).map(Json::String),
            "Fn::GetAtt" => {
                let parts = texts(arg);
                string(self.lookup(&parts.join("."))?)
            }
            "Fn::Sub" => match arg {
                Json::String(text) => string(self.substitute(text, &Map::new())),
                Json::Array(a) => string(self.substitute(
                    a[0].as_str().unwrap(),
                    a[1].as_object().expect("Fn::Sub variables"),
                )),
                other => panic!("Fn::Sub of {other}"),
            },
            "Fn::If" => {
                let a = arg.as_array().expect("Fn::If takes a list");
                let branch = if self.named_condition(a[0].as_str().unwrap()) {
                    1
                } else {
                    2
                };
                self.resolve(&a[branch])
            }
            "Fn::Select" => {
                let a = arg.as_array().unwrap();
                let index: usize = texts(&self.resolve(&a[0])?)[0].parse().unwrap();
                let list = self.resolve(&a[1])?;
                Some(list.as_array().unwrap()[index].clone())
            }
            "Fn::Split" => {
                let a = arg.as_array().unwrap();
                let text = self.resolve(&a[1])?;
                let parts = text.as_str().unwrap().split(a[0].as_str().unwrap());
                Some(Json::Array(parts.map(|p| json!(p)).collect()))
            }
            "Fn::Join" => {
                let a = arg.as_array().unwrap();
                let items = texts(&self.resolve(&a[1])?);
                string(items.join(a[0].as_str().unwrap()))
            }
            _ => return None,
        })
    }
}

// -------------------------------------------------------------------- its own tests

#[cfg(test)]
mod tests {
    use super::*;

    fn statements(yaml: &str) -> Vec<Json> {
        let v: Value = serde_yaml::from_str(yaml).unwrap();
        long_form(&v).as_array().unwrap().clone()
    }

    #[test]
    fn actions_and_resources_match_with_wildcards_and_an_explicit_deny_wins() {
        let policy = statements(
            r#"
- Effect: Allow
  Action: ["s3:Get*", "sqs:SendMessage"]
  Resource: ["arn:aws:s3:::bucket/*", "arn:aws:sqs:us-east-1:1:app-?"]
- Effect: Deny
  NotAction: s3:GetObjectTagging
  Resource: arn:aws:s3:::bucket/secret/*
"#,
        );
        let d = |a: &str, r: &str| decide(&policy, &Request::new(a, r));
        assert_eq!(
            d("s3:GetObject", "arn:aws:s3:::bucket/a/b"),
            Decision::Allowed
        );
        assert_eq!(
            d("S3:getobject", "arn:aws:s3:::bucket/k"),
            Decision::Allowed
        );
        assert_eq!(
            d("s3:PutObject", "arn:aws:s3:::bucket/k"),
            Decision::ImplicitDeny
        );
        assert_eq!(
            d("s3:GetObject", "arn:aws:s3:::other/k"),
            Decision::ImplicitDeny
        );
        assert_eq!(
            d("sqs:SendMessage", "arn:aws:sqs:us-east-1:1:app-1"),
            Decision::Allowed
        );
        assert_eq!(
            d("sqs:SendMessage", "arn:aws:sqs:us-east-1:1:app-12"),
            Decision::ImplicitDeny
        );
        assert_eq!(
            d("s3:GetObject", "arn:aws:s3:::bucket/secret/k"),
            Decision::ExplicitDeny
        );
        assert_eq!(
            d("s3:GetObjectTagging", "arn:aws:s3:::bucket/secret/k"),
            Decision::Allowed
        );
    }

    /// Each request's decision under `policy` is the expected one.
    fn expect(policy: &[Json], cases: &[(&Request, Decision, &str)]) {
        for (request, expected, why) in cases {
            assert_eq!(decide(policy, request), *expected, "{why}: {request:?}");
        }
    }

    #[test]
    fn a_negated_condition_holds_when_its_key_is_absent_so_the_deny_applies() {
        let policy = statements(
            r#"
- Effect: Allow
  Action: iam:CreateRole
  Resource: "*"
  Condition:
    StringEquals: { iam:PermissionsBoundary: arn:aws:iam::1:policy/b }
- Effect: Deny
  Action: iam:*
  Resource: "*"
  Condition:
    StringNotEquals: { iam:PermissionsBoundary: arn:aws:iam::1:policy/b }
"#,
        );
        let role = Request::new("iam:CreateRole", "arn:aws:iam::1:role/r");
        let bounded = |b: &str| role.clone().with("iam:PermissionsBoundary", &[b]);
        expect(
            &policy,
            &[
                (
                    &bounded("arn:aws:iam::1:policy/b"),
                    Decision::Allowed,
                    "the boundary",
                ),
                (
                    &bounded("arn:aws:iam::1:policy/c"),
                    Decision::ExplicitDeny,
                    "another",
                ),
                (
                    &role,
                    Decision::ExplicitDeny,
                    "absent: the negated Deny applies",
                ),
            ],
        );
    }

    #[test]
    fn tag_conditions_set_qualifiers_null_and_a_boundary_hold_as_iam_evaluates_them() {
        let policy = statements(
            r#"
- Effect: Allow
  Action: kms:TagResource
  Resource: "*"
  Condition:
    StringEquals: { "aws:RequestTag/team": a }
    StringEqualsIfExists: { "aws:ResourceTag/team": a }
    ForAllValues:StringLike: { aws:TagKeys: ["team", "aws:*"] }
- Effect: Deny
  Action: kms:UntagResource
  Resource: "*"
  Condition:
    ForAnyValue:StringEquals: { aws:TagKeys: [team] }
- Effect: Allow
  Action: kms:UntagResource
  Resource: "*"
  Condition:
    "Null": { "aws:ResourceTag/team": "false" }
    ArnLike: { kms:ViaService: "arn:aws:*:us-east-1:1:x" }
"#,
        );
        let key = "arn:aws:kms:us-east-1:1:key/k";
        let tag = Request::new("kms:TagResource", key)
            .with("aws:RequestTag/team", &["a"])
            .with("aws:TagKeys", &["team", "aws:cloudformation:stack-name"]);
        let untagged = Request::new("kms:UntagResource", key)
            .with("kms:ViaService", &["arn:aws:s:us-east-1:1:x"]);
        let untag = untagged.clone().with("aws:ResourceTag/team", &["a"]);
        let keys = |r: &Request, k: &[&str]| r.clone().with("aws:TagKeys", k);
        expect(
            &policy,
            &[
                (
                    &tag,
                    Decision::Allowed,
                    "no resource tag yet: IfExists holds",
                ),
                (
                    &tag.clone().with("aws:ResourceTag/team", &["b"]),
                    Decision::ImplicitDeny,
                    "another's",
                ),
                (
                    &keys(&tag, &["team", "owner"]),
                    Decision::ImplicitDeny,
                    "ForAllValues: one key not listed",
                ),
                (
                    &tag.clone().with("aws:RequestTag/team", &["b"]),
                    Decision::ImplicitDeny,
                    "another value",
                ),
                (
                    &keys(&untag, &["other"]),
                    Decision::Allowed,
                    "ForAnyValue: none listed",
                ),
                (
                    &keys(&untag, &["other", "team"]),
                    Decision::ExplicitDeny,
                    "ForAnyValue: one listed",
                ),
                (
                    &untagged,
                    Decision::ImplicitDeny,
                    "Null: false needs the key",
                ),
            ],
        );
        // A boundary caps what the identity policy allows.
        let boundary = statements("- { Effect: Allow, Action: kms:TagResource, Resource: \"*\" }");
        assert_eq!(decide_bounded(&policy, &boundary, &tag), Decision::Allowed);
        let untag = keys(&untag, &["other"]);
        assert_eq!(
            decide_bounded(&policy, &boundary, &untag),
            Decision::ImplicitDeny
        );
    }

    #[test]
    fn intrinsics_resolve_with_parameters_conditions_and_resource_values() {
        let doc: Value = serde_yaml::from_str(
            r#"
Conditions:
  On: !Not [!Equals [!Ref Name, ""]]
Value:
  - !Sub "arn:${AWS::Partition}:x:${AWS::Region}:${AWS::AccountId}:${Name}/${Thing.Arn}"
  - !If [On, !Ref Thing, !Ref AWS::NoValue]
  - !Select [1, !Split ["@", !Ref Name]]
  - !Sub ["${A}-b", { A: !GetAtt Thing.Arn }]
"#,
        )
        .unwrap();
        let doc = long_form(&doc);
        let stack = |name: &str| Stack {
            params: BTreeMap::from([("Name".to_string(), name.to_string())]),
            conditions: doc["Conditions"].clone(),
            values: BTreeMap::from([
                ("Thing".to_string(), "t".to_string()),
                ("Thing.Arn".to_string(), "arn:t".to_string()),
            ]),
            account: "1".into(),
            region: "r".into(),
        };
        assert_eq!(
            stack("a@b").resolve(&doc["Value"]).unwrap(),
            json!(["arn:aws:x:r:1:a@b/arn:t", "t", "b", "arn:t-b"])
        );
        assert_eq!(stack("").resolve(&doc["Value"][1]), None);
    }
}

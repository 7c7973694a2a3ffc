//! What a real AWS deployment must hold (docs/deploy.md and docs/operate.md),
//! checked on `template.yaml` itself: one test per item. Most read the template as YAML; a few
//! read what SAM turns it into (the SAM CLI's own translator, from the project's `.venv`), and
//! the last runs the handlers on the emulator and checks that every AWS call they make is one
//! their function's role grants.

use local::testkit::id;
use serde_json::Value as Json;
use serde_yaml::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

// ------------------------------------------------------------------------------ reading

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub(crate) fn read(file: &str) -> String {
    let path = repo().join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn template() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| serde_yaml::from_str(&read("template.yaml")).expect("template.yaml parses"))
}

fn resources() -> impl Iterator<Item = (&'static str, &'static Value)> {
    template()["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .map(|(k, v)| (k.as_str().unwrap_or_default(), v))
}

fn resource(id: &str) -> &'static Value {
    let r = &template()["Resources"][id];
    assert!(!r.is_null(), "template.yaml declares no resource {id}");
    r
}

fn of_type(kind: &str) -> Vec<(&'static str, &'static Value)> {
    resources().filter(|(_, r)| r["Type"] == kind).collect()
}

fn functions() -> Vec<&'static str> {
    of_type("AWS::Serverless::Function")
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

/// `(tag, value)` of a tagged YAML node (`!Ref X` → `("!Ref", X)`).
fn tagged(v: &Value) -> Option<(String, &Value)> {
    match v {
        Value::Tagged(t) => Some((t.tag.to_string(), &t.value)),
        _ => None,
    }
}

/// The logical id a `!Ref` or `!GetAtt X.Arn` names.
fn target(v: &Value) -> Option<&str> {
    let (tag, value) = tagged(v)?;
    let name = value.as_str()?;
    match tag.as_str() {
        "!Ref" => Some(name),
        "!GetAtt" => name.split('.').next(),
        _ => None,
    }
}

fn is_ref(v: &Value, name: &str) -> bool {
    tagged(v).is_some_and(|(tag, value)| tag == "!Ref" && value.as_str() == Some(name))
}

/// A resource reference in one canonical, readable form: `!GetAtt T.Arn` → `T`,
/// `!GetAtt T.StreamArn` → `T/stream`, `!Sub "${T.Arn}/index/due"` → `T/index/due`, ARNs without
/// their `arn:${AWS::Partition}:` and region/account parts, `!If [c, a, b]` → `a | b`.
fn canonical(v: &Value) -> String {
    match tagged(v) {
        None => v.as_str().unwrap_or_default().to_string(),
        Some((tag, value)) => match tag.as_str() {
            "!Ref" => value.as_str().unwrap_or_default().to_string(),
            "!GetAtt" => {
                let s = value.as_str().unwrap_or_default();
                match s.split_once('.') {
                    Some((id, "Arn")) => id.to_string(),
                    Some((id, "StreamArn")) => format!("{id}/stream"),
                    _ => s.to_string(),
                }
            }
            "!Sub" => {
                let text = match value {
                    Value::Sequence(parts) => parts[0].as_str().unwrap_or_default(),
                    other => other.as_str().unwrap_or_default(),
                };
                let mut s = text
                    .replace("arn:${AWS::Partition}:", "")
                    .replace("${AWS::Region}:${AWS::AccountId}:", "");
                while let Some(start) = s.find("${") {
                    let Some(end) = s[start..].find(".Arn}") else {
                        break;
                    };
                    let id = s[start + 2..start + end].to_string();
                    s.replace_range(start..start + end + 5, &id);
                }
                s
            }
            "!If" => {
                let args = value.as_sequence().expect("!If takes a list");
                format!("{} | {}", canonical(&args[1]), canonical(&args[2]))
            }
            other => panic!("no canonical form for {other}"),
        },
    }
}

fn list(v: &Value) -> Vec<&Value> {
    match v {
        Value::Sequence(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

fn strings(v: &Value) -> Vec<String> {
    list(v)
        .into_iter()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect()
}

/// Every statement of a role's inline policies.
fn statements(role: &str) -> Vec<&'static Value> {
    list(&resource(role)["Properties"]["Policies"])
        .into_iter()
        .flat_map(|p| list(&p["PolicyDocument"]["Statement"]))
        .collect()
}

/// `(resource, action)` pairs a role allows. Its Deny statements (the audit entries') are
/// evaluated with the conditions, by [`decide`].
fn granted(role: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for s in statements(role) {
        if s["Effect"] == "Deny" {
            continue;
        }
        assert_eq!(s["Effect"], "Allow", "{role}: Allow or Deny statements");
        for r in list(&s["Resource"]) {
            for a in strings(&s["Action"]) {
                out.insert((canonical(r), a));
            }
        }
    }
    out
}

/// The role a function runs with (`Role: !GetAtt XRole.Arn`).
fn role_of(function: &str) -> &'static str {
    target(&resource(function)["Properties"]["Role"])
        .unwrap_or_else(|| panic!("{function} has no Role: !GetAtt <Role>.Arn"))
}

fn events(function: &str) -> Vec<(&'static str, &'static Value)> {
    resource(function)["Properties"]["Events"]
        .as_mapping()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str().unwrap_or_default(), v))
                .collect()
        })
        .unwrap_or_default()
}

/// The template after the SAM transform, as SAM CLI's translator produces it (what
/// CloudFormation deploys): generated permissions, roles, stages, schedules.
pub(crate) fn translated() -> &'static Json {
    static OUT: OnceLock<Json> = OnceLock::new();
    OUT.get_or_init(|| {
        let python = repo().join(".venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run scripts/venv.sh (make test does) to install the SAM CLI",
            python.display()
        );
        // The translator wants a code location it can point at; the build supplies the real one.
        const SCRIPT: &str = r#"
import json, sys
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse
class NoManagedPolicies:
    def load(self): return {}
text = open(sys.argv[1]).read().replace("CodeUri: ./", "CodeUri: s3://bucket/code.zip")
print(json.dumps(transform(yaml_parse(text), {}, NoManagedPolicies()), default=str))
"#;
        let out = std::process::Command::new(&python)
            .args(["-c", SCRIPT])
            .arg(repo().join("template.yaml"))
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .output()
            .expect("runs the SAM translator");
        assert!(
            out.status.success(),
            "SAM translation failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("the translator prints JSON")
    })
}

fn translated_of_type(kind: &str) -> Vec<(&'static str, &'static Json)> {
    translated()["Resources"]
        .as_object()
        .expect("Resources")
        .iter()
        .filter(|(_, r)| r["Type"] == kind)
        .map(|(k, v)| (k.as_str(), v))
        .collect()
}

// ------------------------------------------------------- 1: the SES events topic's key

#[test]
fn the_ses_event_topic_is_encrypted_with_a_key_ses_may_use() {
    let topic = &resource("NotificationEventsTopic")["Properties"];
    assert_eq!(
        topic["SignatureVersion"], "2",
        "SNS signs the topic's messages over SHA256"
    );
    let key_id = target(&topic["KmsMasterKeyId"]).expect(
        "the topic's key is one of the template's (not alias/aws/sns, which SES cannot use)",
    );
    let key = resource(key_id);
    assert_eq!(key["Type"], "AWS::KMS::Key");
    assert_eq!(key["Properties"]["EnableKeyRotation"], true);
    let policy = list(&key["Properties"]["KeyPolicy"]["Statement"]);
    let for_service = |service: &str| {
        policy
            .iter()
            .copied()
            .find(|s| s["Principal"]["Service"] == service)
            .unwrap_or_else(|| panic!("the key policy has no statement for {service}"))
    };
    for service in ["ses.amazonaws.com", "sns.amazonaws.com"] {
        let s = for_service(service);
        let actions = strings(&s["Action"]);
        assert!(
            actions.contains(&"kms:GenerateDataKey*".to_string())
                && actions.contains(&"kms:Decrypt".to_string()),
            "{service}: {actions:?}"
        );
        assert!(
            is_ref(
                &s["Condition"]["StringEquals"]["aws:SourceAccount"],
                "AWS::AccountId"
            ),
            "{service} is scoped to this account"
        );
    }
    // SES only for this stack's configuration set.
    let ses = for_service("ses.amazonaws.com");
    assert_eq!(
        canonical(&ses["Condition"]["ArnLike"]["aws:SourceArn"]),
        "ses:configuration-set/${NotificationConfigurationSet}"
    );
    // SES publishes to the topic the configuration set names, and may (topic policy).
    assert!(is_ref(
        &resource("NotificationEventDestination")["Properties"]["EventDestination"]
            ["SnsDestination"]["TopicARN"],
        "NotificationEventsTopic"
    ));
    let topic_policy = &resource("NotificationEventsTopicPolicy")["Properties"]["PolicyDocument"];
    assert!(list(&topic_policy["Statement"])
        .iter()
        .any(|s| s["Principal"]["Service"] == "ses.amazonaws.com" && s["Action"] == "sns:Publish"));
}

// ------------------------------------------------------------- 2: operator routes

#[test]
fn every_operator_route_requires_the_operator_scope_and_only_this_api_may_invoke_the_function() {
    let scope = &template()["Parameters"]["OperatorScope"];
    assert!(scope["Default"].as_str().is_some_and(|s| !s.is_empty()));
    let mut operator_routes = 0;
    for function in functions() {
        for (name, event) in events(function) {
            if event["Type"] != "HttpApi" {
                continue;
            }
            let p = &event["Properties"];
            assert!(
                is_ref(&p["ApiId"], "HttpApi"),
                "{function}.{name} is a route of this stack's HttpApi"
            );
            if p["Path"]
                .as_str()
                .unwrap_or_default()
                .starts_with("/operator")
            {
                operator_routes += 1;
                assert_eq!(p["Auth"]["Authorizer"], "OperatorJwt", "{function}.{name}");
                let scopes = list(&p["Auth"]["AuthorizationScopes"]);
                assert!(
                    scopes.len() == 1 && is_ref(scopes[0], "OperatorScope"),
                    "{function}.{name} requires exactly the operator scope"
                );
            }
        }
    }
    assert!(operator_routes > 0, "the template has operator routes");
    // The function gets the scope to check it again against the request context.
    assert!(is_ref(
        &resource("ApiFunction")["Properties"]["Environment"]["Variables"]["OPERATOR_SCOPE"],
        "OperatorScope"
    ));
    // Who may invoke: nothing in the template grants invocation by hand, and no function URL.
    assert!(of_type("AWS::Lambda::Permission").is_empty());
    for function in functions() {
        assert!(resource(function)["Properties"]["FunctionUrlConfig"].is_null());
    }
    // What SAM generates: one permission per route, API Gateway only, this API only.
    let permissions = translated_of_type("AWS::Lambda::Permission");
    // The token routes, the operator routes, the console's two (its pages check their own
    // signed cookie), and the two unauthenticated routes that have their own throttles (the
    // console's sign-in, provider events) and the unauthenticated liveness route `/health`.
    assert_eq!(permissions.len(), 7, "{permissions:?}");
    for (id, p) in permissions {
        let p = &p["Properties"];
        assert_eq!(p["Principal"], "apigateway.amazonaws.com", "{id}");
        assert_eq!(p["Action"], "lambda:InvokeFunction", "{id}");
        let sub = &p["SourceArn"]["Fn::Sub"];
        assert!(
            sub[0]
                .as_str()
                .is_some_and(|s| s.contains(":execute-api:") && s.contains("${__ApiId__}/")),
            "{id}: {sub}"
        );
        assert_eq!(sub[1]["__ApiId__"]["Ref"], "HttpApi", "{id}");
    }
    // The template says so where the permissions are made.
    assert!(read("template.yaml").contains("Who can invoke this function: only this HTTP API."));
}

// ------------------------------------------------- 8: names, schedules' retries and DLQ

/// Properties that give a resource its physical name.
const NAME_PROPERTIES: &[&str] = &[
    "TableName",
    "QueueName",
    "TopicName",
    "FunctionName",
    "RoleName",
    "AlarmName",
    "LogGroupName",
    "AliasName",
    "Name",
];

#[test]
fn two_stacks_fit_one_account_and_schedules_retry_into_a_dead_letter_queue() {
    for (id, r) in resources() {
        for property in NAME_PROPERTIES {
            let name = &r["Properties"][*property];
            if name.is_null() {
                continue;
            }
            assert!(
                canonical(name).contains("${AWS::StackName}"),
                "{id}.{property} is fixed; leave it to CloudFormation or include the stack name"
            );
        }
    }
    let mut schedules = 0;
    for function in functions() {
        for (name, event) in events(function) {
            if event["Type"] != "ScheduleV2" {
                continue;
            }
            schedules += 1;
            let p = &event["Properties"];
            assert_eq!(p["OmitName"], true, "{function}.{name}: generated name");
            let retry = &p["RetryPolicy"];
            assert!(
                retry["MaximumRetryAttempts"]
                    .as_u64()
                    .is_some_and(|n| n > 0)
                    && retry["MaximumEventAgeInSeconds"].as_u64().is_some(),
                "{function}.{name} retries"
            );
            let dlq = target(&p["DeadLetterConfig"]["Arn"])
                .unwrap_or_else(|| panic!("{function}.{name} has a dead-letter queue"));
            let q = resource(dlq);
            assert_eq!(q["Type"], "AWS::SQS::Queue");
            assert_eq!(q["Properties"]["SqsManagedSseEnabled"], true, "{dlq}");
        }
    }
    assert_eq!(schedules, 3, "sweep, nightly, roll-up walk");
    // What SAM makes of them: no schedule name, the DLQ wired, the schedule role may send to it.
    let made = translated_of_type("AWS::Scheduler::Schedule");
    assert_eq!(made.len(), 3);
    for (id, s) in made {
        assert!(s["Properties"]["Name"].is_null(), "{id} has a fixed name");
        assert!(s["Properties"]["Target"]["DeadLetterConfig"]["Arn"].is_object());
    }
}

// ------------------------------------------- 9: the SNS → API subscription's delivery

#[test]
fn the_provider_event_subscription_waits_for_the_api_and_keeps_what_it_cannot_deliver() {
    let sub = resource("NotificationEventsSubscription");
    let depends: Vec<String> = strings(&sub["DependsOn"]);
    // Both names are what SAM generates for the stage and the /v1 route's permission.
    for id in ["HttpApiStage", "ApiFunctionTokensPermission"] {
        assert!(depends.contains(&id.to_string()), "DependsOn {id}");
        assert!(
            translated()["Resources"][id].is_object(),
            "{id} exists after the SAM transform"
        );
    }
    assert_eq!(
        translated()["Resources"]["HttpApiStage"]["Type"],
        "AWS::ApiGatewayV2::Stage"
    );
    let p = &sub["Properties"];
    assert!(canonical(&p["Endpoint"]).ends_with("/${Stage}/v1/provider-events/ses"));
    let retry = &p["DeliveryPolicy"]["healthyRetryPolicy"];
    assert!(retry["numRetries"].as_u64().is_some_and(|n| n >= 10));
    let phases: u64 = [
        "numNoDelayRetries",
        "numMinDelayRetries",
        "numMaxDelayRetries",
    ]
    .iter()
    .filter_map(|k| retry[*k].as_u64())
    .sum();
    assert!(phases <= retry["numRetries"].as_u64().unwrap_or(0));
    // SNS caps an HTTP/S delivery policy at an hour of retrying.
    let worst = retry["numMaxDelayRetries"].as_u64().unwrap_or(0)
        * retry["maxDelayTarget"].as_u64().unwrap_or(0);
    assert!(worst < 3600, "{worst} s");
    let dlq = target(&p["RedrivePolicy"]["deadLetterTargetArn"]).expect("a DLQ");
    assert_eq!(resource(dlq)["Type"], "AWS::SQS::Queue");
    // SNS may send to that queue, for this topic only.
    let policy = of_type("AWS::SQS::QueuePolicy")
        .into_iter()
        .find(|(_, q)| {
            list(&q["Properties"]["Queues"])
                .iter()
                .any(|v| target(v) == Some(dlq))
        })
        .map(|(_, q)| q)
        .expect("a queue policy for the subscription's DLQ");
    let s = list(&policy["Properties"]["PolicyDocument"]["Statement"]);
    assert!(s
        .iter()
        .any(|s| s["Principal"]["Service"] == "sns.amazonaws.com"
            && s["Action"] == "sqs:SendMessage"
            && is_ref(
                &s["Condition"]["ArnEquals"]["aws:SourceArn"],
                "NotificationEventsTopic"
            )));
}

// ----------------------------------------------------------- 10: provider secrets

#[test]
fn provider_secrets_live_in_secrets_manager_and_functions_get_only_their_arn() {
    // No parameter carries a secret, so no environment variable can.
    for (name, spec) in template()["Parameters"].as_mapping().unwrap() {
        assert!(spec["NoEcho"].is_null(), "{name:?} is a secret parameter");
    }
    // The provider-event secrets and the web console's signing key, each named to the one
    // function that reads it by an `…_ARN` variable.
    let secrets = of_type("AWS::SecretsManager::Secret");
    let mut names: Vec<&str> = secrets.iter().map(|(name, _)| *name).collect();
    names.sort();
    assert_eq!(
        names,
        ["ConsoleSigningKey", "ProviderEventSecrets", "TokenCheckKey"]
    );
    for (_, spec) in &secrets {
        assert!(
            target(&spec["Properties"]["KmsKeyId"]).is_some(),
            "the secret is on a CMK"
        );
    }
    let expected_vars = [
        ("NOTIFICATION_PROVIDER_SECRETS_ARN", "ProviderEventSecrets"),
        ("CONSOLE_SIGNING_KEY_ARN", "ConsoleSigningKey"),
        ("TOKEN_CHECK_KEY_ARN", "TokenCheckKey"),
    ];
    let mut readers = Vec::new();
    let globals = &template()["Globals"]["Function"]["Environment"]["Variables"];
    for function in functions() {
        let env = &resource(function)["Properties"]["Environment"]["Variables"];
        for vars in [globals, env] {
            for (name, value) in vars.as_mapping().into_iter().flatten() {
                let name = name.as_str().unwrap_or_default();
                // A `…_KEY_ID` names a KMS key (SIGNING_KEY_ID seals signing secrets), not
                // secret material.
                if (name.contains("SECRET")
                    || name.contains("SIGNING_KEY")
                    || name.contains("CHECK_KEY"))
                    && !name.ends_with("_KEY_ID")
                {
                    assert!(
                        name.ends_with("_ARN"),
                        "{function}: {name} must carry an ARN"
                    );
                    let (_, secret) = expected_vars
                        .iter()
                        .find(|(var, _)| *var == name)
                        .unwrap_or_else(|| panic!("{function}: {name} is not a known secret"));
                    assert!(is_ref(value, secret), "{function}: {name} names {secret}");
                    readers.push(function);
                }
            }
        }
    }
    assert_eq!(readers, ["ApiFunction", "ApiFunction", "ApiFunction"]);
    // Exactly that reader may read exactly those secrets (and decrypt through Secrets Manager).
    for function in functions() {
        let reads: Vec<_> = granted(role_of(function))
            .into_iter()
            .filter(|(_, a)| a.starts_with("secretsmanager:"))
            .collect();
        if function == "ApiFunction" {
            assert_eq!(
                reads,
                [
                    (
                        "ConsoleSigningKey".to_string(),
                        "secretsmanager:GetSecretValue".into()
                    ),
                    (
                        "ProviderEventSecrets".to_string(),
                        "secretsmanager:GetSecretValue".into()
                    ),
                    (
                        "TokenCheckKey".to_string(),
                        "secretsmanager:GetSecretValue".into()
                    )
                ]
            );
        } else {
            assert!(reads.is_empty(), "{function}: {reads:?}");
        }
    }
    let decrypt = statements("ApiRole")
        .into_iter()
        .find(|s| s["Action"] == "kms:Decrypt")
        .expect("the API may decrypt the secret");
    assert_eq!(
        canonical(&decrypt["Condition"]["StringEquals"]["kms:ViaService"]),
        "secretsmanager.${AWS::Region}.amazonaws.com"
    );
}

// ------------------------------------------------ 6: webhook signing secrets under KMS

/// The KMS actions a role allows on the signing-secrets key, each with its statement.
fn signing_key_grants(role: &str) -> Vec<(String, &'static Value)> {
    statements(role)
        .into_iter()
        .filter(|s| {
            list(&s["Resource"])
                .iter()
                .any(|r| canonical(r) == "SigningSecretsKey")
        })
        .flat_map(|s| strings(&s["Action"]).into_iter().map(move |a| (a, s)))
        .collect()
}

#[test]
fn signing_secrets_are_sealed_under_a_rotating_key_only_the_api_and_the_worker_may_use() {
    let key = resource("SigningSecretsKey");
    assert_eq!(key["Type"], "AWS::KMS::Key");
    assert_eq!(key["Properties"]["EnableKeyRotation"], true);
    assert_eq!(
        key["DeletionPolicy"], "Retain",
        "losing the key loses every secret"
    );
    let context = |s: &Value| {
        s["Condition"]["StringEquals"]["kms:EncryptionContext:purpose"]
            .as_str()
            .map(str::to_owned)
    };
    // The key policy: administration without use, and use only with the secrets' context.
    for s in list(&key["Properties"]["KeyPolicy"]["Statement"]) {
        assert_eq!(s["Effect"], "Allow");
        assert_ne!(s["Principal"], Value::from("*"), "{s:?}");
        for action in strings(&s["Action"]) {
            assert!(
                action != "kms:*" && action != "*",
                "kms:* on the signing key"
            );
            if ["kms:Decrypt", "kms:GenerateDataKey"].contains(&action.as_str())
                || action.starts_with("kms:Encrypt")
                || action.starts_with("kms:ReEncrypt")
            {
                assert_eq!(
                    context(s).as_deref(),
                    Some(shared::data_keys::CONTEXT_VALUE),
                    "{action} without the signing-secret context"
                );
            }
        }
    }
    // The functions get its id (not a secret), the API may only generate data keys, the worker
    // may only decrypt them, and nobody else may do anything with it.
    let globals = &template()["Globals"]["Function"]["Environment"]["Variables"];
    assert!(is_ref(&globals["SIGNING_KEY_ID"], "SigningSecretsKey"));
    for function in functions() {
        let grants = signing_key_grants(role_of(function));
        let actions: Vec<&str> = grants.iter().map(|(a, _)| a.as_str()).collect();
        let expected: &[&str] = match function {
            "ApiFunction" => &["kms:GenerateDataKey"],
            "DeliverFunction" => &["kms:Decrypt"],
            _ => &[],
        };
        assert_eq!(actions, expected, "{function}");
        for (action, s) in grants {
            assert_eq!(
                context(s).as_deref(),
                Some(shared::data_keys::CONTEXT_VALUE),
                "{function}: {action} without the signing-secret context"
            );
        }
    }
}

/// The internet-facing function cannot open a signing secret: the API role's only `kms:Decrypt`
/// is the operations key's, and only through Secrets Manager (the secrets it reads); no
/// statement of it grants `kms:Decrypt` (or `kms:*`, `*`) on the signing-secrets key or on every
/// resource. Test events are sent by the delivery function, whose role is the only one that
/// may decrypt signing secrets.
#[test]
fn the_api_role_has_no_kms_decrypt_but_the_operations_keys_through_secrets_manager() {
    let role = role_of("ApiFunction");
    for s in statements(role) {
        let actions = strings(&s["Action"]);
        let decrypts = actions
            .iter()
            .any(|a| a == "kms:Decrypt" || a == "kms:*" || a == "*" || a == "kms:Decrypt*");
        if !decrypts {
            continue;
        }
        let resources: Vec<String> = list(&s["Resource"]).into_iter().map(canonical).collect();
        assert_eq!(
            resources,
            ["OperationsKey"],
            "{role}: kms:Decrypt on {resources:?}"
        );
        assert_eq!(
            canonical(&s["Condition"]["StringEquals"]["kms:ViaService"]),
            "secretsmanager.${AWS::Region}.amazonaws.com",
            "{role}: kms:Decrypt outside Secrets Manager"
        );
    }
    let deciphering: Vec<&str> = functions()
        .into_iter()
        .filter(|f| {
            signing_key_grants(role_of(f))
                .iter()
                .any(|(a, _)| a == "kms:Decrypt")
        })
        .collect();
    assert_eq!(deciphering, ["DeliverFunction"]);
}

// ------------------------------------------------------------------------ 11: alarms

fn alarms() -> Vec<(&'static str, &'static Value)> {
    of_type("AWS::CloudWatch::Alarm")
}

/// The metrics an alarm reads: its own (`Namespace`, `MetricName`, `Dimensions`), or each of a
/// metric-math alarm's `Metrics[].MetricStat.Metric`.
fn alarm_metrics(alarm: &Value) -> Vec<&Value> {
    let p = &alarm["Properties"];
    if p["Metrics"].is_null() {
        return vec![p];
    }
    list(&p["Metrics"])
        .into_iter()
        .map(|m| &m["MetricStat"]["Metric"])
        .filter(|m| !m.is_null())
        .collect()
}

fn reads(metric: &Value, namespace: &str, name: &str, dimension: &str, value: &str) -> bool {
    canonical(&metric["Namespace"]) == namespace
        && metric["MetricName"] == name
        && list(&metric["Dimensions"])
            .iter()
            .any(|d| d["Name"] == dimension && target(&d["Value"]) == Some(value))
}

fn alarm_on(namespace: &str, metric: &str, dimension: &str, value: &str) -> bool {
    alarms().iter().any(|(_, a)| {
        alarm_metrics(a)
            .iter()
            .any(|m| reads(m, namespace, metric, dimension, value))
    })
}

/// Queues that only ever hold what failed: redrive targets, on-failure destinations, schedule
/// and subscription DLQs.
fn dead_letter_queues() -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    for (_, q) in of_type("AWS::SQS::Queue") {
        if let Some(t) = target(&q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]) {
            out.insert(t);
        }
    }
    for function in functions() {
        for (_, e) in events(function) {
            let p = &e["Properties"];
            for v in [
                &p["DestinationConfig"]["OnFailure"]["Destination"],
                &p["DeadLetterConfig"]["Arn"],
            ] {
                if let Some(t) = target(v) {
                    out.insert(t);
                }
            }
        }
    }
    for (_, s) in of_type("AWS::SNS::Subscription") {
        if let Some(t) = target(&s["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]) {
            out.insert(t);
        }
    }
    out
}

#[test]
fn alarms_cover_what_on_call_needs_and_each_says_what_to_do() {
    for function in functions() {
        for metric in ["Errors", "Throttles"] {
            assert!(
                alarm_on("AWS/Lambda", metric, "FunctionName", function),
                "{function}: {metric}"
            );
        }
        if events(function)
            .iter()
            .any(|(_, e)| e["Type"] == "DynamoDB")
        {
            assert!(
                alarm_on("AWS/Lambda", "IteratorAge", "FunctionName", function),
                "{function}: IteratorAge"
            );
        }
    }
    assert!(alarm_on(
        "AWS/SQS",
        "ApproximateAgeOfOldestMessage",
        "QueueName",
        "DeliveryQueue"
    ));
    let dlqs = dead_letter_queues();
    assert!(dlqs.len() >= 6, "{dlqs:?}");
    for q in &dlqs {
        assert!(
            alarm_on(
                "AWS/SQS",
                "ApproximateNumberOfMessagesVisible",
                "QueueName",
                q
            ),
            "{q}: depth"
        );
    }
    assert!(alarm_on("AWS/ApiGateway", "5xx", "ApiId", "HttpApi"));
    for metric in ["Reputation.BounceRate", "Reputation.ComplaintRate"] {
        assert!(
            alarms()
                .iter()
                .any(|(_, a)| a["Properties"]["Namespace"] == "AWS/SES"
                    && a["Properties"]["MetricName"] == metric),
            "{metric}"
        );
    }
    // Dispatcher silence watches the sweep's own metric, not every invocation of the function.
    let silence = &resource("DispatcherSilenceAlarm")["Properties"];
    assert!(is_ref(&silence["Namespace"], "MetricsNamespace"));
    assert_eq!(silence["MetricName"], "DispatcherSweepRuns");
    assert_eq!(silence["TreatMissingData"], "breaching");
    assert!(list(&silence["Dimensions"])
        .iter()
        .any(|d| d["Name"] == "Stage" && is_ref(&d["Value"], "Stage")));
    assert!(
        !alarms()
            .iter()
            .any(|(_, a)| a["Properties"]["MetricName"] == "Invocations"),
        "no alarm counts every invocation"
    );
    // Every alarm says what to do and notifies the (encrypted) alarm topic.
    let topic = resource("AlarmTopic");
    assert!(target(&topic["Properties"]["KmsMasterKeyId"]).is_some());
    for (id, a) in alarms() {
        let p = &a["Properties"];
        let description = p["AlarmDescription"].as_str().unwrap_or_default();
        assert!(description.contains(" Do: "), "{id}: {description}");
        let actions = list(&p["AlarmActions"]);
        assert_eq!(actions.len(), 1, "{id}");
        assert_eq!(canonical(actions[0]), "AlarmTopic | AlarmTopicArn", "{id}");
    }
}

/// The alarms on-call lacked: the notification queue's oldest message (older than the backoff
/// of its receives can make it), the notification table's throttles, a spike of refused
/// credentials (the API's own count of its 401s), and a 5xx alarm that leaves out the
/// provider-events route's deliberate 503s (API Gateway's count less the API's count of them).
#[test]
fn on_call_hears_of_a_stuck_notification_queue_table_throttles_refused_credentials_and_only_unintended_5xx(
) {
    use shared::domain::retry::{notification_visibility_delay, FixedJitter};
    use shared::web::metrics::{AUTHENTICATION_FAILURES, PROVIDER_EVENTS_DEFERRED};
    let props = |id: &str| &resource(id)["Properties"];
    let number = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("not a number: {v:?}"));

    // The queue's age: past the longest a message waits out its backoff over every receive that
    // leaves it on the queue (the last one fails it), at the top of the jitter.
    let receives = resource("NotificationQueue")["Properties"]["RedrivePolicy"]["maxReceiveCount"]
        .as_u64()
        .unwrap() as u32;
    let backoff: u64 = (1..receives)
        .map(|r| notification_visibility_delay(r, None, &mut FixedJitter(0.999_999)).as_secs())
        .sum();
    let age = props("NotificationQueueAgeAlarm");
    assert!(reads(
        age,
        "AWS/SQS",
        "ApproximateAgeOfOldestMessage",
        "QueueName",
        "NotificationQueue"
    ));
    assert_eq!(age["Statistic"], "Maximum");
    assert!(
        number(&age["Threshold"]) > backoff as f64 && number(&age["Threshold"]) <= 3.0 * 3600.0,
        "the age threshold is past the {backoff} s of backoff and within hours"
    );
    assert_eq!(age["ComparisonOperator"], "GreaterThanThreshold");

    // The notification table's throttles, reads and writes, as the delivery table's.
    for (id, metric) in [
        (
            "NotificationTableWriteThrottlesAlarm",
            "WriteThrottleEvents",
        ),
        ("NotificationTableReadThrottlesAlarm", "ReadThrottleEvents"),
    ] {
        let p = props(id);
        assert!(
            reads(p, "AWS/DynamoDB", metric, "TableName", "NotificationTable"),
            "{id}"
        );
        assert_eq!(p["Statistic"], "Sum", "{id}");
        assert_eq!(number(&p["Threshold"]), 0.0, "{id}");
        assert_eq!(p["ComparisonOperator"], "GreaterThanThreshold", "{id}");
    }

    // Refused credentials: the API's metric, in the deployment's namespace and stage.
    let auth = props("ApiAuthenticationFailuresAlarm");
    assert!(is_ref(&auth["Namespace"], "MetricsNamespace"));
    assert_eq!(auth["MetricName"], AUTHENTICATION_FAILURES);
    assert!(list(&auth["Dimensions"])
        .iter()
        .any(|d| d["Name"] == "Stage" && is_ref(&d["Value"], "Stage")));
    assert_eq!(auth["Statistic"], "Sum");
    assert_eq!(number(&auth["Period"]), 300.0);
    let threshold = number(&auth["Threshold"]);
    assert!(
        (20.0..=500.0).contains(&threshold),
        "a spike, not one mistyped token: {threshold}"
    );
    assert_eq!(auth["TreatMissingData"], "notBreaching");

    // 5xx: API Gateway's count less the deliberate 503s, both summed over one period.
    let api5xx = &resource("Api5xxAlarm");
    let p = &api5xx["Properties"];
    assert!(p["MetricName"].is_null(), "the 5xx alarm is metric math");
    let metrics = list(&p["Metrics"]);
    let by_id = |id: &str| {
        *metrics
            .iter()
            .find(|m| m["Id"] == id)
            .unwrap_or_else(|| panic!("Api5xxAlarm has no metric {id}"))
    };
    let returned: Vec<_> = metrics.iter().filter(|m| m["ReturnData"] == true).collect();
    assert_eq!(returned.len(), 1, "one expression is alarmed on");
    let expression = returned[0]["Expression"].as_str().unwrap_or_default();
    let ids: Vec<&str> = metrics
        .iter()
        .filter(|m| !m["MetricStat"].is_null())
        .map(|m| m["Id"].as_str().unwrap())
        .collect();
    let gateway = ids
        .iter()
        .find(|id| {
            reads(
                &by_id(id)["MetricStat"]["Metric"],
                "AWS/ApiGateway",
                "5xx",
                "ApiId",
                "HttpApi",
            )
        })
        .expect("API Gateway's 5xx");
    let deferred = ids
        .iter()
        .find(|id| {
            let m = &by_id(id)["MetricStat"]["Metric"];
            is_ref(&m["Namespace"], "MetricsNamespace")
                && m["MetricName"] == PROVIDER_EVENTS_DEFERRED
                && list(&m["Dimensions"])
                    .iter()
                    .any(|d| d["Name"] == "Stage" && is_ref(&d["Value"], "Stage"))
        })
        .expect("the API's count of deliberate 503s");
    assert_eq!(
        expression.replace(' ', ""),
        format!("FILL({gateway},0)-FILL({deferred},0)")
    );
    for id in [gateway, deferred] {
        let stat = &by_id(id)["MetricStat"];
        assert_eq!(
            (stat["Stat"].as_str(), number(&stat["Period"])),
            (Some("Sum"), 300.0),
            "{id}"
        );
    }
    assert_eq!(number(&p["Threshold"]), 5.0);
    assert_eq!(p["ComparisonOperator"], "GreaterThanOrEqualToThreshold");
}

// --------------------------------------------------------------- 12: observability

#[test]
fn the_api_writes_json_access_logs_and_every_function_logs_to_its_own_group_with_retention() {
    let retention = &template()["Parameters"]["LogRetentionInDays"];
    assert_eq!(retention["Default"], 30);
    let check_group = |id: &str| {
        let g = resource(id);
        assert_eq!(g["Type"], "AWS::Logs::LogGroup", "{id}");
        assert!(
            is_ref(&g["Properties"]["RetentionInDays"], "LogRetentionInDays"),
            "{id}"
        );
        assert!(
            target(&g["Properties"]["KmsKeyId"]).is_some(),
            "{id} is encrypted"
        );
    };
    let access = &resource("HttpApi")["Properties"]["AccessLogSettings"];
    check_group(target(&access["DestinationArn"]).expect("the access log's group"));
    let format: Json = serde_json::from_str(access["Format"].as_str().unwrap_or_default())
        .expect("the access log format is JSON");
    for field in [
        "requestId",
        "routeKey",
        "status",
        "responseLatency",
        "integrationErrorMessage",
    ] {
        assert!(format[field].is_string(), "access log field {field}");
    }
    let mut groups = BTreeSet::new();
    for function in functions() {
        let group = target(&resource(function)["Properties"]["LoggingConfig"]["LogGroup"])
            .unwrap_or_else(|| panic!("{function} names its log group"));
        check_group(group);
        assert!(groups.insert(group), "{group} is shared");
        // And may write there only.
        let logs: BTreeSet<_> = granted(role_of(function))
            .into_iter()
            .filter(|(_, a)| a.starts_with("logs:"))
            .collect();
        assert_eq!(
            logs,
            BTreeSet::from([
                (group.to_string(), "logs:CreateLogStream".to_string()),
                (group.to_string(), "logs:PutLogEvents".to_string()),
            ]),
            "{function}"
        );
    }
}

#[test]
fn every_function_logs_at_the_log_level_parameter_which_defaults_to_info() {
    let level = &template()["Parameters"]["LogLevel"];
    assert_eq!(level["Default"], "INFO");
    assert_eq!(
        strings(&level["AllowedValues"]),
        ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
    );
    assert_eq!(
        shared::runtime::DEFAULT_LOG_LEVEL,
        "INFO",
        "the functions' own default is the template's"
    );
    let globals = &template()["Globals"]["Function"];
    // The functions read it, and Lambda filters their JSON lines at the same level.
    let var = shared::runtime::LOG_LEVEL_VAR;
    assert!(
        is_ref(&globals["Environment"]["Variables"][var], "LogLevel"),
        "{var}"
    );
    assert!(is_ref(
        &globals["LoggingConfig"]["ApplicationLogLevel"],
        "LogLevel"
    ));
    for function in functions() {
        let properties = &resource(function)["Properties"];
        assert!(
            properties["Environment"]["Variables"][var].is_null()
                && properties["LoggingConfig"]["ApplicationLogLevel"].is_null(),
            "{function} sets a level of its own"
        );
    }
}

// ------------------------------------------------------- 13: least-privilege IAM

/// What each function's code calls, read from the code paths its `main.rs` runs, as
/// `(resource, actions)`. Event source mappings' own needs are included: a DynamoDB stream
/// (`DescribeStream`, `GetRecords`, `GetShardIterator` on the stream, `ListStreams` on the
/// table's streams), an SQS queue (`ReceiveMessage`, `DeleteMessage`, `GetQueueAttributes`), an
/// on-failure destination (`SendMessage`). A transaction needs the actions of its parts. Every
/// function also writes its own log group and X-Ray segments (checked on top of this list).
/// `(resource, actions)` pairs of one function.
type Needs = &'static [(&'static str, &'static [&'static str])];

/// A DynamoDB stream event source mapping's reads (on the stream).
const STREAM_READ: &[&str] = &[
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
];
/// An SQS event source mapping's reads.
const QUEUE_READ: &[&str] = &[
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
];
/// What `notify::table::NotificationTable` calls on the notification table: reads by key and by notice,
/// puts, updates and the transactions of both with work-row deletes.
const NOTIFY_STORE: &[&str] = &[
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
];

const CODE_NEEDS: &[(&str, Needs)] = &[
    (
        "IngestFunction",
        &[
            // store::account_config::load (query by account); ingest::put_new (conditional put);
            // store::account::enlist (an account created before the ACCOUNTS listing).
            (
                "DeliveryTable",
                &["dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"],
            ),
            // The Changes mapping, on the created table or the application's own.
            (
                "ChangesTable/stream | dynamodb:table/${ExistingChangesTableName}/stream/*",
                STREAM_READ,
            ),
            (
                "ChangesTable/stream/* | dynamodb:table/${ExistingChangesTableName}/stream/*",
                &["dynamodb:ListStreams"],
            ),
            ("IngestFailureQueue", &["sqs:SendMessage"]),
        ],
    ),
    (
        "DispatchFunction",
        &[
            // delivery::rollup (read_partition, status writes, lost-dispatch requeue) and
            // dispatch::postpone.
            ("DeliveryTable", &["dynamodb:Query", "dynamodb:UpdateItem"]),
            // dispatch::sweep_shard.
            ("DeliveryTable/index/due", &["dynamodb:Query"]),
            ("DeliveryTable/stream", STREAM_READ),
            ("DeliveryTable/stream/*", &["dynamodb:ListStreams"]),
            // dispatch::publish (SendMessageBatch).
            ("DeliveryQueue", &["sqs:SendMessage"]),
        ],
    ),
    (
        "DeliverFunction",
        &[
            // worker: claim/outcome/restart reads and updates, the consecutive-dead count and
            // pause transactions (updates), internal::record_snapshot (put), ConfigCache (query).
            (
                "DeliveryTable",
                &[
                    "dynamodb:GetItem",
                    "dynamodb:Query",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                ],
            ),
            // worker: the auto-pause transaction puts the administrator notice.
            ("NotificationTable", &["dynamodb:PutItem"]),
            ("DeliveryQueue", QUEUE_READ),
            // worker::defer: delayed copies of a timed-out endpoint's messages (SendMessageBatch).
            ("DeliveryQueue", &["sqs:SendMessage"]),
            // envelope::SecretOpener: unwraps the signing secrets' data keys.
            ("SigningSecretsKey", &["kms:Decrypt"]),
        ],
    ),
    (
        "NotifyFunction",
        &[
            // notify::store (get, query_prefix, transactions of put/update/delete, record),
            // notify::notices (fan-out puts).
            ("NotificationTable", NOTIFY_STORE),
            ("NotificationTable/stream", STREAM_READ),
            ("NotificationTable/stream/*", &["dynamodb:ListStreams"]),
            // notify::stream::publish (SendMessageBatch), worker backoff (visibility), mapping.
            (
                "NotificationQueue",
                &[
                    "sqs:SendMessage",
                    "sqs:ChangeMessageVisibility",
                    "sqs:ReceiveMessage",
                    "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes",
                ],
            ),
            ("NotificationStreamFailureQueue", &["sqs:SendMessage"]),
            // notify::channels::email (SendEmail from the sender, in the configuration set).
            (
                "ses:identity/${NotificationSenderAddress}",
                &["ses:SendEmail"],
            ),
            ("ses:identity/${Domain}", &["ses:SendEmail"]),
            (
                "ses:configuration-set/${NotificationConfigurationSet}",
                &["ses:SendEmail"],
            ),
        ],
    ),
    (
        "ReconcileFunction",
        &[
            // delivery::rollup (walk, partitions, writes), dispatch sweep (postpone), stopped
            // replay jobs (replay_job::stalled, the job by key, by_subscription_page behind the
            // keys-only index, restarts).
            (
                "DeliveryTable",
                &[
                    "dynamodb:GetItem",
                    "dynamodb:BatchGetItem",
                    "dynamodb:Query",
                    "dynamodb:UpdateItem",
                ],
            ),
            ("DeliveryTable/index/rollup", &["dynamodb:Query"]),
            ("DeliveryTable/index/due", &["dynamodb:Query"]),
            ("DeliveryTable/index/by_subscription", &["dynamodb:Query"]),
            ("DeliveryTable/index/listing", &["dynamodb:Query"]),
            // notify::settle (watch index, get, transition transactions, record).
            (
                "NotificationTable",
                &[
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:DeleteItem",
                ],
            ),
            ("NotificationTable/index/watch", &["dynamodb:Query"]),
            ("DeliveryQueue", &["sqs:SendMessage"]),
        ],
    ),
    (
        "ApiFunction",
        &[
            // api::db, api::auth (tokens), operations (retry, replay, restart, audit
            // transactions), operations::event_monitor, store::batch (BatchGetItem behind keys-only
            // indexes), the operator's reconcile run (roll-up, sweep), and store::account's live
            // check in a create's transaction (ConditionCheck).
            (
                "DeliveryTable",
                &[
                    "dynamodb:GetItem",
                    "dynamodb:BatchGetItem",
                    "dynamodb:Query",
                    "dynamodb:ConditionCheckItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:DeleteItem",
                ],
            ),
            ("DeliveryTable/index/by_subscription", &["dynamodb:Query"]),
            ("DeliveryTable/index/listing", &["dynamodb:Query"]),
            ("DeliveryTable/index/rollup", &["dynamodb:Query"]),
            ("DeliveryTable/index/due", &["dynamodb:Query"]),
            // store::published_change::put: published changes, into the created table or the
            // application's own (conditional puts only).
            (
                "ChangesTable | dynamodb:table/${ExistingChangesTableName}",
                &["dynamodb:PutItem"],
            ),
            // notices (create with the daily quota counter's conditional ADD, withdraw,
            // supersede), provider events (confirm), requeue, the console inbox, settling in
            // the operator's reconcile run, and the operators' overview (failed notifications).
            ("NotificationTable", NOTIFY_STORE),
            ("NotificationTable/index/inbox", &["dynamodb:Query"]),
            ("NotificationTable/index/watch", &["dynamodb:Query"]),
            ("NotificationTable/index/trouble", &["dynamodb:Query"]),
            ("DeliveryQueue", &["sqs:SendMessage"]),
            // The provider-event secrets, read once per container.
            ("ProviderEventSecrets", &["secretsmanager:GetSecretValue"]),
            // The web console's signing key, read once per container.
            ("ConsoleSigningKey", &["secretsmanager:GetSecretValue"]),
            // The token-check key, read once per container.
            ("TokenCheckKey", &["secretsmanager:GetSecretValue"]),
            ("OperationsKey", &["kms:Decrypt"]),
            // envelope::SecretSealer: data keys for sealing webhook signing secrets (never
            // opening them: test events are sent by the delivery function).
            ("SigningSecretsKey", &["kms:GenerateDataKey"]),
        ],
    ),
];

fn needs(function: &str) -> BTreeSet<(String, String)> {
    let (_, list) = CODE_NEEDS
        .iter()
        .find(|(f, _)| *f == function)
        .unwrap_or_else(|| panic!("CODE_NEEDS has no entry for {function}"));
    let mut out: BTreeSet<(String, String)> = list
        .iter()
        .flat_map(|(r, actions)| actions.iter().map(|a| (r.to_string(), a.to_string())))
        .collect();
    let group = target(&resource(function)["Properties"]["LoggingConfig"]["LogGroup"])
        .unwrap_or_default()
        .to_string();
    for a in ["logs:CreateLogStream", "logs:PutLogEvents"] {
        out.insert((group.clone(), a.into()));
    }
    for a in ["xray:PutTraceSegments", "xray:PutTelemetryRecords"] {
        out.insert(("*".into(), a.into()));
    }
    out
}

#[test]
fn every_function_role_grants_exactly_what_its_code_calls() {
    let mut listed: Vec<&str> = CODE_NEEDS.iter().map(|(f, _)| *f).collect();
    let mut declared = functions();
    listed.sort();
    declared.sort();
    assert_eq!(listed, declared, "CODE_NEEDS names every function");
    for function in functions() {
        let props = &resource(function)["Properties"];
        assert!(
            props["Policies"].is_null(),
            "{function}: SAM policy templates grant more than the code needs"
        );
        let role = role_of(function);
        let r = &resource(role)["Properties"];
        assert!(r["ManagedPolicyArns"].is_null(), "{role}: managed policies");
        assert_eq!(
            r["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["Service"],
            "lambda.amazonaws.com"
        );
        let granted = granted(role);
        let needed = needs(function);
        let extra: Vec<_> = granted.difference(&needed).collect();
        let missing: Vec<_> = needed.difference(&granted).collect();
        assert!(
            extra.is_empty() && missing.is_empty(),
            "{function} ({role}): grants beyond its code {extra:#?}; missing {missing:#?}"
        );
        // "*" only where the service has no resource-level permissions (X-Ray).
        for (resource, action) in &granted {
            if resource == "*" {
                assert!(action.starts_with("xray:"), "{function}: {action} on *");
            }
        }
    }
    // A role is one function's: no two functions share one.
    let roles: BTreeSet<_> = functions().into_iter().map(role_of).collect();
    assert_eq!(roles.len(), functions().len());
    // After the SAM transform the function roles are exactly these (SAM adds no policies to a
    // function with its own role); the other roles are the schedules', which only invoke their
    // function and send to the schedule DLQ.
    for (id, role) in translated_of_type("AWS::IAM::Role") {
        if roles.contains(id) {
            assert!(role["Properties"]["ManagedPolicyArns"].is_null(), "{id}");
            continue;
        }
        assert_eq!(
            role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["Service"]
                [0],
            "scheduler.amazonaws.com",
            "{id}"
        );
        for policy in role["Properties"]["Policies"].as_array().unwrap() {
            for s in policy["PolicyDocument"]["Statement"].as_array().unwrap() {
                let action = s["Action"].as_str().unwrap_or_default();
                let res = s["Resource"]["Fn::GetAtt"][0].as_str().unwrap_or_default();
                assert!(
                    (action == "lambda:InvokeFunction" && res.ends_with("Function"))
                        || (action == "sqs:SendMessage" && res == "ScheduleDeadLetterQueue"),
                    "{id}: {s}"
                );
            }
        }
    }
}

#[test]
fn ingest_may_update_only_the_accounts_listing_attributes_of_account_items() {
    use shared::store::attrs::listing;
    let updates: Vec<_> = statements("IngestRole")
        .into_iter()
        .filter(|s| {
            s["Effect"] == "Allow"
                && strings(&s["Action"])
                    .iter()
                    .any(|a| a == "dynamodb:UpdateItem")
        })
        .collect();
    assert_eq!(updates.len(), 1, "{updates:#?}");
    let update = updates[0];
    assert_eq!(strings(&update["Action"]), ["dynamodb:UpdateItem"]);
    let condition = &update["Condition"];
    assert_eq!(
        strings(&condition["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]),
        [shared::store::keys::account_pk(&id("a1")).replace("a1", "*")]
    );
    let mut attributes = strings(&condition["ForAllValues:StringEquals"]["dynamodb:Attributes"]);
    attributes.sort();
    let mut expected = vec!["pk", "sk", listing::KEY, listing::SORT];
    expected.sort();
    assert_eq!(attributes, expected);
    assert_eq!(
        condition["StringEqualsIfExists"]["dynamodb:ReturnValues"],
        "NONE"
    );
}

// ------------------------------------------------- 13: writes held to their key prefixes

/// DynamoDB's write actions (a transaction is authorised as its parts: these same actions).
const ITEM_WRITES: &[&str] = &[
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
];

/// The tables whose writes are held to key prefixes.
const HELD_TABLES: &[&str] = &["DeliveryTable", "NotificationTable"];

/// One write as IAM authorises it: the action, the table (logical id) and the request's
/// condition keys (`dynamodb:LeadingKeys`: the partition keys written; `dynamodb:Attributes`:
/// the attribute names the request names; `dynamodb:ReturnValues`, when it sets one).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ItemWrite {
    action: String,
    table: String,
    leading_keys: Vec<String>,
    attributes: Vec<String>,
    return_values: Option<String>,
}

impl ItemWrite {
    fn of(action: &str, table: &str, pk: &str) -> Self {
        ItemWrite {
            action: action.into(),
            table: table.into(),
            leading_keys: vec![pk.into()],
            attributes: vec![partition_key(table).into()],
            return_values: None,
        }
    }

    /// `(action, table, prefix)`: the kind of write (the prefix: its first key up to and with
    /// the first `#`, or the whole key).
    fn kind(&self) -> (String, String, String) {
        let key = self
            .leading_keys
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        let prefix = key.split_inclusive('#').next().unwrap_or_default();
        (self.action.clone(), self.table.clone(), prefix.to_string())
    }

    /// The same write to the partition `pk` instead.
    fn to(&self, pk: &str) -> Self {
        ItemWrite {
            leading_keys: vec![pk.into()],
            ..self.clone()
        }
    }
}

/// The partition-key attribute of a table (its `KeySchema`'s `HASH`).
fn partition_key(table: &str) -> &'static str {
    list(&resource(table)["Properties"]["KeySchema"])
        .into_iter()
        .find(|k| k["KeyType"] == "HASH")
        .and_then(|k| k["AttributeName"].as_str())
        .unwrap_or_else(|| panic!("{table} has no partition key"))
}

/// IAM's `StringLike`: `*` matches any run of characters, `?` any one.
fn like(pattern: &str, value: &str) -> bool {
    fn go(p: &[char], v: &[char]) -> bool {
        match p.split_first() {
            None => v.is_empty(),
            Some(('*', rest)) => (0..=v.len()).any(|i| go(rest, &v[i..])),
            Some(('?', rest)) => !v.is_empty() && go(rest, &v[1..]),
            Some((c, rest)) => v.first() == Some(c) && go(rest, &v[1..]),
        }
    }
    let (p, v): (Vec<char>, Vec<char>) = (pattern.chars().collect(), value.chars().collect());
    go(&p, &v)
}

/// Whether a statement's `Condition` holds for `w`, as IAM evaluates it: `ForAllValues:` (every
/// value of the request's set matches; an empty set does), `ForAnyValue:` (one does), plain
/// operators on a single value, `IfExists` (an absent key passes). An operator or key this does
/// not know fails the test rather than being guessed at.
fn condition_holds(condition: &Value, w: &ItemWrite) -> bool {
    let Some(operators) = condition.as_mapping() else {
        assert!(
            condition.is_null(),
            "a Condition is a mapping: {condition:?}"
        );
        return true;
    };
    operators.iter().all(|(operator, keys)| {
        let operator = operator.as_str().unwrap_or_default();
        let (set, test) = match operator.split_once(':') {
            Some((set, test)) => (Some(set), test),
            None => (None, operator),
        };
        let (test, if_exists) = match test.strip_suffix("IfExists") {
            Some(test) => (test, true),
            None => (test, false),
        };
        keys.as_mapping()
            .expect("condition keys")
            .iter()
            .all(|(key, patterns)| {
                let patterns = strings(patterns);
                let values: Option<Vec<String>> = match key.as_str().unwrap_or_default() {
                    "dynamodb:LeadingKeys" => Some(w.leading_keys.clone()),
                    "dynamodb:Attributes" => Some(w.attributes.clone()),
                    "dynamodb:ReturnValues" => w.return_values.clone().map(|v| vec![v]),
                    other => panic!("the evaluator does not know the condition key {other}"),
                };
                let matches = |v: &String| {
                    patterns.iter().any(|p| match test {
                        "StringLike" => like(p, v),
                        "StringEquals" => p == v,
                        other => panic!("the evaluator does not know the operator {other}"),
                    })
                };
                match (set, values) {
                    (Some("ForAllValues"), values) => {
                        values.unwrap_or_default().iter().all(matches)
                    }
                    (Some("ForAnyValue"), values) => values.unwrap_or_default().iter().any(matches),
                    (None, None) => if_exists,
                    (None, Some(values)) => values.len() == 1 && matches(&values[0]),
                    (Some(other), _) => panic!("the evaluator does not know {other}:"),
                }
            })
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Allowed,
    /// No statement allows it.
    NotAllowed,
    /// A Deny statement refuses it.
    Denied,
}

/// What `role`'s statements decide for `w`: a matching Deny wins, then a matching Allow.
fn decide(role: &str, w: &ItemWrite) -> Decision {
    let mut allowed = false;
    for s in statements(role) {
        let acts = strings(&s["Action"]).iter().any(|a| like(a, &w.action));
        let on = list(&s["Resource"])
            .iter()
            .any(|r| canonical(r).split(" | ").next() == Some(w.table.as_str()));
        if !(acts && on && condition_holds(&s["Condition"], w)) {
            continue;
        }
        match s["Effect"].as_str() {
            Some("Deny") => return Decision::Denied,
            Some("Allow") => allowed = true,
            other => panic!("{role}: effect {other:?}"),
        }
    }
    if allowed {
        Decision::Allowed
    } else {
        Decision::NotAllowed
    }
}

/// The key patterns `role` writes `action` on `table` to (its Allow statements' LeadingKeys).
fn write_patterns(role: &str, action: &str, table: &str) -> Vec<String> {
    statements(role)
        .into_iter()
        .filter(|s| {
            s["Effect"] == "Allow"
                && strings(&s["Action"]).iter().any(|a| a == action)
                && list(&s["Resource"]).iter().any(|r| canonical(r) == table)
        })
        .flat_map(|s| strings(&s["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]))
        .collect()
}

/// A partition key `pattern` names (its wildcards filled in).
fn key_of(pattern: &str) -> String {
    pattern.replace('*', "acct_x#1").replace('?', "x")
}

/// Every key pattern any role writes to `table`: the prefixes a role's writes are tested against.
fn known_patterns(table: &str) -> BTreeSet<String> {
    functions()
        .into_iter()
        .flat_map(|f| {
            ITEM_WRITES
                .iter()
                .flat_map(move |a| write_patterns(role_of(f), a, table))
        })
        .collect()
}

/// `w` is allowed to `role`, and the same write is not to a partition the role's lists do not
/// name: another role's prefix, or one nobody writes.
fn assert_held(function: &str, w: &ItemWrite) {
    let role = role_of(function);
    assert_eq!(
        decide(role, w),
        Decision::Allowed,
        "{function} ({role}) may not make {w:#?}"
    );
    let own = write_patterns(role, &w.action, &w.table);
    let elsewhere = known_patterns(&w.table)
        .into_iter()
        .map(|p| key_of(&p))
        .chain(["UNLISTED#acct_x".to_string(), "acct_x".to_string()])
        .filter(|k| !own.iter().any(|p| like(p, k)));
    for key in elsewhere {
        assert_ne!(
            decide(role, &w.to(&key)),
            Decision::Allowed,
            "{function} ({role}) may make {} on {} to {key}, a partition it does not write",
            w.action,
            w.table
        );
    }
}

/// Every write a function role allows on the two tables names its key prefixes
/// (ForAllValues:StringLike on dynamodb:LeadingKeys, no bare `*`); a write of that action to any
/// other prefix is not allowed; and no function role may update or remove an audit entry,
/// explicitly (a Deny, which no later Allow can widen). Nothing in the code updates or deletes
/// one: entries carry no expiry and no function has a path that changes them (the measured tests
/// below would meet the Deny).
#[test]
fn every_role_writes_only_the_key_prefixes_it_names_and_none_may_change_an_audit_entry() {
    use shared::store::keys;
    let audit = keys::audit_pk(&id("a1"));
    for function in functions() {
        let role = role_of(function);
        for s in statements(role) {
            let writes = strings(&s["Action"])
                .into_iter()
                .any(|a| ITEM_WRITES.contains(&a.as_str()));
            let held = list(&s["Resource"])
                .iter()
                .any(|r| HELD_TABLES.contains(&canonical(r).as_str()));
            if s["Effect"] != "Allow" || !writes || !held {
                continue;
            }
            let patterns =
                strings(&s["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]);
            assert!(
                !patterns.is_empty() && patterns.iter().all(|p| !p.starts_with('*')),
                "{role}: a write without its key prefixes: {s:#?}"
            );
        }
        for table in HELD_TABLES {
            for action in ITEM_WRITES {
                let own = write_patterns(role, action, table);
                for pattern in &own {
                    let w = ItemWrite::of(action, table, &key_of(pattern));
                    if decide(role, &w) == Decision::Denied {
                        continue; // an audit entry's update or delete: below
                    }
                    assert_held(function, &w);
                }
            }
        }
        for action in [
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchWriteItem",
        ] {
            let w = ItemWrite::of(action, "DeliveryTable", &audit);
            assert_eq!(
                decide(role, &w),
                Decision::Denied,
                "{role}: {action} on {audit}"
            );
        }
    }
    // The API writes audit entries (a conditional put of a new one) and nothing else may.
    let put = ItemWrite::of("dynamodb:PutItem", "DeliveryTable", &audit);
    for function in functions() {
        let expected = if function == "ApiFunction" {
            Decision::Allowed
        } else {
            Decision::NotAllowed
        };
        assert_eq!(decide(role_of(function), &put), expected, "{function}");
    }
    // A write the scenarios below do not reach (fifty dead deliveries in a row): the worker's
    // auto-pause puts the administrator notice, keyed as the store keys it.
    let notice = shared::store::notice::subscription_paused_notice(
        &id("a1"),
        &id("sub_1"),
        &["admin@example.com".to_string()],
        50,
        shared::domain::time::Timestamp(1),
    );
    let item = shared::store::notice::notice_item(&notice).unwrap();
    let pk = item[partition_key("NotificationTable")].as_s().unwrap();
    assert_held(
        "DeliverFunction",
        &ItemWrite::of("dynamodb:PutItem", "NotificationTable", pk),
    );
    // The evaluator itself: wildcards, sets, IfExists.
    assert!(
        like("ACCT#*", "ACCT#a1")
            && !like("ACCT#*", "ACCTS#a1")
            && like("ROLLUP_WALK", "ROLLUP_WALK")
    );
    assert!(!like("TOKEN#*", &keys::token_ref_pk(&id("a1"))));
}

// ------------------------------------------------------------- 17: deploying as a team

/// `[section]` → key → value of a samconfig.toml (strings, booleans, numbers).
pub(crate) fn samconfig() -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut section = String::new();
    for line in read("samconfig.toml").lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
        } else if let Some((k, v)) = line.split_once('=') {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v);
            out.entry(section.clone())
                .or_default()
                .insert(k.trim().to_string(), v.replace("\\\"", "\""));
        }
    }
    out
}

#[test]
fn each_stage_deploys_unattended_from_samconfig_with_every_required_parameter() {
    let config = samconfig();
    let required: Vec<&str> = template()["Parameters"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, spec)| spec["Default"].is_null())
        .map(|(name, _)| name.as_str().unwrap())
        .collect();
    assert!(required.contains(&"OperatorJwtIssuer"));
    let mut stacks = BTreeSet::new();
    for stage in ["dev", "staging", "prod"] {
        let deploy = config
            .get(&format!("{stage}.deploy.parameters"))
            .unwrap_or_else(|| panic!("samconfig.toml has no [{stage}.deploy.parameters]"));
        assert_eq!(
            deploy["confirm_changeset"], "false",
            "{stage} deploys unattended"
        );
        assert_eq!(deploy["fail_on_empty_changeset"], "false", "{stage}");
        assert!(deploy["capabilities"].contains("CAPABILITY_IAM"));
        let stack = &deploy["stack_name"];
        assert!(stack.ends_with(stage), "{stack}");
        assert!(stacks.insert(stack.clone()), "{stack} is used twice");
        let overrides = &deploy["parameter_overrides"];
        assert!(
            overrides.contains(&format!("Stage=\"{stage}\"")),
            "{overrides}"
        );
        for p in &required {
            assert!(overrides.contains(&format!("{p}=")), "{stage}: {p}");
        }
    }
    // The deploying guide says what each parameter a deployment must set is.
    let guide = read("docs/deploy.md");
    for p in &required {
        assert!(guide.contains(p), "docs/deploy.md documents {p}");
    }
}

#[test]
fn the_stack_can_use_the_owning_applications_changes_table_and_keeps_queued_data() {
    let changes = resource("ChangesTable");
    assert_eq!(changes["Condition"], "CreateChangesTable");
    let condition = &template()["Conditions"]["CreateChangesTable"];
    let (tag, args) = tagged(condition).unwrap();
    assert_eq!(tag, "!Equals");
    assert!(is_ref(&args[0], "ExistingChangesTableName") && args[1] == "");
    // The ingest mapping and every function's CHANGES_TABLE follow the choice.
    let stream =
        &resource("IngestFunction")["Properties"]["Events"]["Changes"]["Properties"]["Stream"];
    assert_eq!(
        canonical(stream),
        "ChangesTable/stream | ExistingChangesStreamArn"
    );
    assert_eq!(
        canonical(&template()["Globals"]["Function"]["Environment"]["Variables"]["CHANGES_TABLE"]),
        "ChangesTable | ExistingChangesTableName"
    );
    // The harness reads the same choice: with an existing table named, it provisions none and
    // the functions' CHANGES_TABLE is that name.
    let text = read("template.yaml").replace(
        "  ExistingChangesTableName:\n    Type: String\n    Default: \"\"",
        "  ExistingChangesTableName:\n    Type: String\n    Default: \"rhythm-changes\"",
    );
    let existing = local::template::Template::parse(&text).unwrap();
    assert!(existing.table("ChangesTable").is_none());
    assert_eq!(
        existing.function_env["CHANGES_TABLE"],
        local::template::EnvValue::Ref("ExistingChangesTableName".into())
    );
    let created = local::template::Template::load_project().unwrap();
    assert!(created.table("ChangesTable").is_some());
    // Queues hold work or failed records: kept when the stack or the queue goes.
    for (id, q) in of_type("AWS::SQS::Queue") {
        assert_eq!(q["DeletionPolicy"], "Retain", "{id}");
        assert_eq!(q["UpdateReplacePolicy"], "Retain", "{id}");
    }
    // The runbook.
    let guide = read("docs/operate.md");
    let section = guide
        .split("## Runbook")
        .nth(1)
        .expect("docs/operate.md has a section \"Runbook\"");
    for topic in [
        "redrive",
        "24 hours",
        "re-confirm",
        "Rotating",
        "Pausing and resuming",
    ] {
        assert!(section.contains(topic), "the runbook covers {topic:?}");
    }
}

#[test]
fn make_test_runs_checkov_with_a_skip_list_that_says_why() {
    let script = read("scripts/test.sh");
    let lint = script
        .find("cfn-lint template.yaml")
        .expect("cfn-lint runs");
    let checkov = script
        .find("checkov --config-file .checkov.yaml")
        .expect("checkov runs with the repo's skip list");
    assert!(
        lint < checkov,
        "checkov runs after cfn-lint and sam validate"
    );
    let pins = read("scripts/requirements-checkov.txt");
    assert!(
        pins.lines().any(|l| l.starts_with("checkov==")),
        "checkov is pinned"
    );
    // Each skipped check has a comment saying why just above it.
    let config = read(".checkov.yaml");
    let lines: Vec<&str> = config.lines().collect();
    let mut skips = 0;
    for (i, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("- CKV") {
            skips += 1;
            assert!(
                i > 0 && lines[i - 1].trim_start().starts_with('#'),
                "{line} says why"
            );
        }
    }
    assert!(skips > 0 && skips <= 8, "a short skip list: {skips}");
}

// --------------------------------------------------- 4: a batch within the function's timeout

/// Ingest receives at most a hundred changes an invocation, and the stream taps that drive the
/// handlers in the tests and the bench hand them over in batches of the same size.
#[test]
fn ingest_receives_at_most_a_hundred_changes_an_invocation_as_the_local_stream_taps_do() {
    let changes = &resource("IngestFunction")["Properties"]["Events"]["Changes"]["Properties"];
    let batch = changes["BatchSize"]
        .as_u64()
        .expect("the Changes event's BatchSize");
    assert!(
        batch <= 100,
        "ingest takes at most a hundred changes at once: {batch}"
    );
    let mut streams = 0;
    for (function, _) in of_type("AWS::Serverless::Function") {
        for (event, e) in events(function)
            .into_iter()
            .filter(|(_, e)| e["Type"] == "DynamoDB")
        {
            streams += 1;
            assert_eq!(
                e["Properties"]["BatchSize"].as_u64(),
                Some(local::streams::STREAM_BATCH as u64),
                "{function}'s {event} stream batch is the taps'"
            );
        }
    }
    assert!(
        streams >= 3,
        "the changes, delivery and notification streams: {streams}"
    );
}

/// The windows `DeliveryBatchingWindowSeconds` allows (seconds).
fn batching_windows() -> Vec<u64> {
    list(&template()["Parameters"]["DeliveryBatchingWindowSeconds"]["AllowedValues"])
        .iter()
        .map(|v| seconds(v, "an allowed batching window"))
        .collect()
}

/// The three mappings on a delivery's path take their batching window from one parameter, from
/// no wait to a second, a second by default (the notification mapping keeps its own second).
#[test]
fn the_batching_window_on_a_deliverys_path_is_a_setting_from_none_to_a_second() {
    assert_eq!(batching_windows(), [0, 1]);
    let parameter = &template()["Parameters"]["DeliveryBatchingWindowSeconds"];
    assert_eq!(parameter["Default"].as_u64(), Some(1));
    for (function, event) in [
        ("IngestFunction", "Changes"),
        ("DispatchFunction", "NewWork"),
        ("DeliverFunction", "Work"),
    ] {
        let window = &resource(function)["Properties"]["Events"][event]["Properties"]
            ["MaximumBatchingWindowInSeconds"];
        assert!(
            is_ref(window, "DeliveryBatchingWindowSeconds"),
            "{function} {event}: {window:?}"
        );
    }
    let notices = &resource("NotifyFunction")["Properties"]["Events"]["Notices"]["Properties"];
    assert_eq!(notices["MaximumBatchingWindowInSeconds"].as_u64(), Some(1));
}

/// The concurrency of a delivery's path is a setting on each of its three mappings, within what
/// Lambda allows, its defaults those docs/scale.md sizes for 20,000 changes a second across
/// accounts: two batches a shard on both streams, 200 worker invocations.
#[test]
fn the_concurrency_of_a_deliverys_path_is_a_setting_whose_defaults_carry_the_load_scale_names() {
    let events = |function: &str, event: &str| {
        &resource(function)["Properties"]["Events"][event]["Properties"]
    };
    for (parameter, default, (low, high), value) in [
        (
            "ChangesParallelizationFactor",
            2,
            (1, 10),
            &events("IngestFunction", "Changes")["ParallelizationFactor"],
        ),
        (
            "DispatchParallelizationFactor",
            2,
            (1, 10),
            &events("DispatchFunction", "NewWork")["ParallelizationFactor"],
        ),
        (
            "WorkerMaximumConcurrency",
            200,
            (2, 1000),
            &events("DeliverFunction", "Work")["ScalingConfig"]["MaximumConcurrency"],
        ),
    ] {
        assert!(is_ref(value, parameter), "{parameter} is used: {value:?}");
        let p = &template()["Parameters"][parameter];
        assert_eq!(p["Default"].as_u64(), Some(default), "{parameter}");
        let bounds = (p["MinValue"].as_u64(), p["MaxValue"].as_u64());
        assert_eq!(
            bounds,
            (Some(low), Some(high)),
            "{parameter}: Lambda's range"
        );
    }
    // docs/scale.md sizes each for that load and names it.
    let scale = read("docs/scale.md");
    for figure in [
        "`ChangesParallelizationFactor`",
        "`DispatchParallelizationFactor`",
        "`WorkerMaximumConcurrency`",
    ] {
        assert!(scale.contains(figure), "docs/scale.md names {figure}");
    }
}

fn seconds(v: &Value, what: &str) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{what} is a number of seconds"))
}

/// The delivery worker's worst batch (every message packed full, every attempt hanging to its
/// timeout, as many at once as the worker runs) fits the function's timeout with the worker's deadline margin; the queue's
/// visibility timeout is at least six times the function's plus its batching window (AWS's advice
/// for SQS event sources) and longer than the processing lease.
#[test]
fn the_delivery_workers_worst_batch_fits_its_timeout_and_the_queue_outwaits_it() {
    use shared::delivery::worker::{
        webhook::DEFAULT_TIMEOUT, BATCH_CONCURRENCY, DEADLINE_MARGIN, LEASE,
    };
    let function = &resource("DeliverFunction")["Properties"];
    let timeout = seconds(&function["Timeout"], "DeliverFunction's Timeout");
    let work = &function["Events"]["Work"]["Properties"];
    let batch = seconds(&work["BatchSize"], "the Work event's BatchSize");
    // The longest window the parameter allows.
    assert!(is_ref(
        &work["MaximumBatchingWindowInSeconds"],
        "DeliveryBatchingWindowSeconds"
    ));
    let window = batching_windows().into_iter().max().unwrap();
    assert!(
        is_ref(
            &work["ScalingConfig"]["MaximumConcurrency"],
            "WorkerMaximumConcurrency"
        ),
        "the Work event bounds its concurrency"
    );
    // Every message may carry up to `PACKED` deliveries, each attempted on its own.
    let deliveries = batch * shared::delivery::dispatch::publish::PACKED as u64;
    let rounds = deliveries.div_ceil(BATCH_CONCURRENCY as u64);
    // Half a second per round for the store calls around the attempts.
    let worst =
        rounds * (DEFAULT_TIMEOUT.as_millis() as u64 + 500) + DEADLINE_MARGIN.as_millis() as u64;
    assert!(
        worst <= timeout * 1000,
        "{rounds} rounds of {DEFAULT_TIMEOUT:?} attempts need {worst} ms; the function has {timeout} s"
    );
    let queue = &resource("DeliveryQueue")["Properties"];
    let visibility = seconds(
        &queue["VisibilityTimeout"],
        "DeliveryQueue's VisibilityTimeout",
    );
    assert!(
        visibility >= 6 * timeout + window,
        "visibility {visibility} s < 6 x {timeout} s + {window} s"
    );
    assert!(
        visibility > LEASE.as_secs(),
        "visibility {visibility} s <= the lease"
    );
}

// ------------------------------- 13, measured: what the handlers call on the emulator

mod measured {
    use super::*;
    use aws_smithy_runtime_api::box_error::BoxError;
    use aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef;
    use aws_smithy_runtime_api::client::interceptors::Intercept;
    use aws_smithy_runtime_api::client::orchestrator::Metadata;
    use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
    use aws_smithy_types::config_bag::ConfigBag;
    use axum::body::Body;
    use axum::http::{header, Method, Request};
    use local::fixtures::{catalog_change, Fixtures};
    use local::pipeline::Pipeline;
    use local::provision::Stack;
    use local::receiver::{Receiver, Reply};
    use local::testkit::TestStack;
    use shared::aws::Clients;
    use shared::clock::{Clock, ManualClock};
    use shared::delivery::dispatch::Dispatcher;
    use shared::delivery::ingest::Ingest;
    use shared::delivery::worker::DeliveryWorker;
    use shared::domain::retry::RetryPolicy;
    use shared::notify::notice_service::{NewNotice, NoticeService};
    use shared::notify::settle::reconcile_settler;
    use shared::notify::stream::NotificationStream;
    use shared::notify::table::NotificationTable;
    use shared::notify::worker::NotificationWorker;
    use shared::reconcile::{Budget, Reconciler, RunKind};
    use shared::store::notice::{Contact, Recipient};
    use shared::web::{ApiState, OperatorAuth};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tower::ServiceExt;

    use aws_sdk_dynamodb::operation as ddb;
    use aws_sdk_dynamodb::types as ddb_types;
    use aws_sdk_kms::operation as kms;
    use aws_sdk_secretsmanager::operation as secretsmanager;
    use aws_sdk_sesv2::operation as ses;
    use aws_sdk_sqs::operation as sqs;

    /// The template's secret a secret id (`{prefix}/{name}`, or its ARN) names, by its name.
    fn secret(id: Option<&str>) -> String {
        let id = id.unwrap_or_default();
        [
            ("/token-check-key", "TokenCheckKey"),
            ("/console-signing-key", "ConsoleSigningKey"),
            ("/provider-event-secrets", "ProviderEventSecrets"),
        ]
        .iter()
        .find(|(name, _)| id.contains(name))
        .map_or_else(|| id.to_string(), |(_, logical)| logical.to_string())
    }

    /// Records the IAM action and resource of every AWS request made through its clients, read
    /// from the request itself (table, index, queue, and each part of a transaction).
    #[derive(Clone, Debug)]
    struct Recorder {
        tables: BTreeMap<String, String>,
        queues: BTreeMap<String, String>,
        /// KMS key id and ARN → logical id.
        keys: BTreeMap<String, String>,
        sender: String,
        seen: Arc<Mutex<BTreeSet<(String, String)>>>,
        /// Every write to a table, as IAM authorises it (each part of a transaction apart).
        writes: Arc<Mutex<BTreeSet<ItemWrite>>>,
    }

    impl Recorder {
        fn new(stack: &Stack, sender: &str) -> Self {
            Recorder {
                tables: stack
                    .tables
                    .iter()
                    .map(|(id, t)| (t.name.clone(), id.clone()))
                    .collect(),
                queues: stack
                    .queues
                    .iter()
                    .map(|(id, q)| (q.url.clone(), id.clone()))
                    .collect(),
                keys: stack
                    .keys
                    .iter()
                    .flat_map(|(id, k)| [(k.id.clone(), id.clone()), (k.arn.clone(), id.clone())])
                    .collect(),
                sender: sender.to_string(),
                seen: Arc::default(),
                writes: Arc::default(),
            }
        }

        fn clients(&self, t: &TestStack) -> Clients {
            Clients::with_interceptor(&t.sdk, self.clone())
        }

        fn seen(&self) -> BTreeSet<(String, String)> {
            self.seen.lock().unwrap().clone()
        }

        fn writes(&self) -> BTreeSet<ItemWrite> {
            self.writes.lock().unwrap().clone()
        }

        /// One write of `action` on table `name` to the item `key` (`item`: a put's whole item),
        /// naming the attributes of its expressions.
        #[allow(clippy::too_many_arguments)]
        fn item_write(
            &self,
            action: &str,
            name: &str,
            key: &std::collections::HashMap<String, ddb_types::AttributeValue>,
            expressions: &[Option<&str>],
            names: Option<&std::collections::HashMap<String, String>>,
            return_values: Option<&ddb_types::ReturnValue>,
        ) -> ItemWrite {
            let table = self.table(Some(name), None);
            let pk = partition_key(&table);
            let mut attributes: BTreeSet<String> = key.keys().cloned().collect();
            attributes.extend(names.into_iter().flat_map(|n| n.values().cloned()));
            attributes.extend(expressions.iter().flatten().flat_map(|e| bare_names(e)));
            ItemWrite {
                action: action.into(),
                leading_keys: key
                    .get(pk)
                    .and_then(|v| v.as_s().ok())
                    .cloned()
                    .into_iter()
                    .collect(),
                table,
                attributes: attributes.into_iter().collect(),
                return_values: return_values.map(|r| r.as_str().to_string()),
            }
        }

        fn record_writes(
            &self,
            input: &aws_smithy_runtime_api::client::interceptors::context::Input,
        ) {
            let mut found = Vec::new();
            if let Some(i) = input.downcast_ref::<ddb::put_item::PutItemInput>() {
                found.push(self.item_write(
                    "dynamodb:PutItem",
                    i.table_name().unwrap_or_default(),
                    i.item().unwrap_or(&Default::default()),
                    &[i.condition_expression()],
                    i.expression_attribute_names(),
                    i.return_values(),
                ));
            } else if let Some(i) = input.downcast_ref::<ddb::update_item::UpdateItemInput>() {
                found.push(self.item_write(
                    "dynamodb:UpdateItem",
                    i.table_name().unwrap_or_default(),
                    i.key().unwrap_or(&Default::default()),
                    &[i.update_expression(), i.condition_expression()],
                    i.expression_attribute_names(),
                    i.return_values(),
                ));
            } else if let Some(i) = input.downcast_ref::<ddb::delete_item::DeleteItemInput>() {
                found.push(self.item_write(
                    "dynamodb:DeleteItem",
                    i.table_name().unwrap_or_default(),
                    i.key().unwrap_or(&Default::default()),
                    &[i.condition_expression()],
                    i.expression_attribute_names(),
                    i.return_values(),
                ));
            } else if let Some(i) =
                input.downcast_ref::<ddb::transact_write_items::TransactWriteItemsInput>()
            {
                for item in i.transact_items() {
                    if let Some(p) = item.put() {
                        found.push(self.item_write(
                            "dynamodb:PutItem",
                            p.table_name(),
                            p.item(),
                            &[p.condition_expression()],
                            p.expression_attribute_names(),
                            None,
                        ));
                    }
                    if let Some(u) = item.update() {
                        found.push(self.item_write(
                            "dynamodb:UpdateItem",
                            u.table_name(),
                            u.key(),
                            &[Some(u.update_expression()), u.condition_expression()],
                            u.expression_attribute_names(),
                            None,
                        ));
                    }
                    if let Some(d) = item.delete() {
                        found.push(self.item_write(
                            "dynamodb:DeleteItem",
                            d.table_name(),
                            d.key(),
                            &[d.condition_expression()],
                            d.expression_attribute_names(),
                            None,
                        ));
                    }
                }
            } else if let Some(i) =
                input.downcast_ref::<ddb::batch_write_item::BatchWriteItemInput>()
            {
                for (name, requests) in i.request_items().into_iter().flatten() {
                    let mut batch = ItemWrite {
                        action: "dynamodb:BatchWriteItem".into(),
                        table: self.table(Some(name), None),
                        leading_keys: Vec::new(),
                        attributes: Vec::new(),
                        return_values: None,
                    };
                    for r in requests {
                        let key = r
                            .put_request()
                            .map(|p| p.item())
                            .or(r.delete_request().map(|d| d.key()));
                        if let Some(key) = key {
                            let one = self.item_write("", name, key, &[], None, None);
                            batch.leading_keys.extend(one.leading_keys);
                            batch.attributes.extend(one.attributes);
                        }
                    }
                    batch.leading_keys.sort();
                    batch.leading_keys.dedup();
                    batch.attributes.sort();
                    batch.attributes.dedup();
                    found.push(batch);
                }
            }
            self.writes.lock().unwrap().extend(found);
        }

        fn table(&self, name: Option<&str>, index: Option<&str>) -> String {
            let name = name.unwrap_or_default();
            let id = self.tables.get(name).cloned().unwrap_or(name.to_string());
            match index {
                Some(i) => format!("{id}/index/{i}"),
                None => id,
            }
        }

        fn key(&self, key_id: Option<&str>) -> String {
            let key_id = key_id.unwrap_or_default();
            self.keys.get(key_id).cloned().unwrap_or(key_id.to_string())
        }

        fn queue(&self, url: Option<&str>) -> String {
            let url = url.unwrap_or_default();
            self.queues.get(url).cloned().unwrap_or(url.to_string())
        }

        fn record(
            &self,
            input: &aws_smithy_runtime_api::client::interceptors::context::Input,
            cfg: &ConfigBag,
        ) {
            let mut found: Vec<(String, &str)> = Vec::new();
            if let Some(i) = input.downcast_ref::<ddb::put_item::PutItemInput>() {
                found.push((self.table(i.table_name(), None), "dynamodb:PutItem"));
            } else if let Some(i) = input.downcast_ref::<ddb::update_item::UpdateItemInput>() {
                found.push((self.table(i.table_name(), None), "dynamodb:UpdateItem"));
            } else if let Some(i) = input.downcast_ref::<ddb::delete_item::DeleteItemInput>() {
                found.push((self.table(i.table_name(), None), "dynamodb:DeleteItem"));
            } else if let Some(i) = input.downcast_ref::<ddb::get_item::GetItemInput>() {
                found.push((self.table(i.table_name(), None), "dynamodb:GetItem"));
            } else if let Some(i) = input.downcast_ref::<ddb::query::QueryInput>() {
                found.push((self.table(i.table_name(), i.index_name()), "dynamodb:Query"));
            } else if let Some(i) = input.downcast_ref::<ddb::scan::ScanInput>() {
                found.push((self.table(i.table_name(), i.index_name()), "dynamodb:Scan"));
            } else if let Some(i) = input.downcast_ref::<ddb::batch_get_item::BatchGetItemInput>()
            {
                for t in i.request_items().into_iter().flat_map(|m| m.keys()) {
                    found.push((self.table(Some(t), None), "dynamodb:BatchGetItem"));
                }
            } else if let Some(i) =
                input.downcast_ref::<ddb::batch_write_item::BatchWriteItemInput>()
            {
                for t in i.request_items().into_iter().flat_map(|m| m.keys()) {
                    found.push((self.table(Some(t), None), "dynamodb:BatchWriteItem"));
                }
            } else if let Some(i) =
                input.downcast_ref::<ddb::transact_write_items::TransactWriteItemsInput>()
            {
                for item in i.transact_items() {
                    if let Some(p) = item.put() {
                        found.push((self.table(Some(p.table_name()), None), "dynamodb:PutItem"));
                    }
                    if let Some(u) = item.update() {
                        found.push((self.table(Some(u.table_name()), None), "dynamodb:UpdateItem"));
                    }
                    if let Some(d) = item.delete() {
                        found.push((self.table(Some(d.table_name()), None), "dynamodb:DeleteItem"));
                    }
                    if let Some(c) = item.condition_check() {
                        found.push((
                            self.table(Some(c.table_name()), None),
                            "dynamodb:ConditionCheckItem",
                        ));
                    }
                }
            } else if let Some(i) = input.downcast_ref::<sqs::send_message::SendMessageInput>() {
                found.push((self.queue(i.queue_url()), "sqs:SendMessage"));
            } else if let Some(i) =
                input.downcast_ref::<sqs::send_message_batch::SendMessageBatchInput>()
            {
                found.push((self.queue(i.queue_url()), "sqs:SendMessage"));
            } else if let Some(i) = input
                .downcast_ref::<sqs::change_message_visibility::ChangeMessageVisibilityInput>()
            {
                found.push((self.queue(i.queue_url()), "sqs:ChangeMessageVisibility"));
            } else if let Some(i) = input.downcast_ref::<
                sqs::change_message_visibility_batch::ChangeMessageVisibilityBatchInput,
            >() {
                found.push((self.queue(i.queue_url()), "sqs:ChangeMessageVisibility"));
            } else if let Some(i) = input.downcast_ref::<sqs::delete_message::DeleteMessageInput>()
            {
                found.push((self.queue(i.queue_url()), "sqs:DeleteMessage"));
            } else if let Some(i) =
                input.downcast_ref::<sqs::delete_message_batch::DeleteMessageBatchInput>()
            {
                found.push((self.queue(i.queue_url()), "sqs:DeleteMessage"));
            } else if let Some(i) =
                input.downcast_ref::<kms::generate_data_key::GenerateDataKeyInput>()
            {
                found.push((self.key(i.key_id()), "kms:GenerateDataKey"));
            } else if let Some(i) = input.downcast_ref::<kms::decrypt::DecryptInput>() {
                // A Decrypt without a key id would need the grant on whichever key KMS finds.
                found.push((self.key(i.key_id().or(Some("?"))), "kms:Decrypt"));
            } else if let Some(i) =
                input.downcast_ref::<secretsmanager::get_secret_value::GetSecretValueInput>()
            {
                found.push((secret(i.secret_id()), "secretsmanager:GetSecretValue"));
            } else if let Some(i) = input.downcast_ref::<ses::send_email::SendEmailInput>() {
                assert_eq!(i.from_email_address(), Some(self.sender.as_str()));
                found.push((
                    "ses:identity/${NotificationSenderAddress}".into(),
                    "ses:SendEmail",
                ));
            } else {
                // Anything else is a call no role grants: it fails the test by name.
                let op = cfg
                    .load::<Metadata>()
                    .map(|m| format!("{}:{}", m.service(), m.name()))
                    .unwrap_or_else(|| "unknown operation".into());
                self.seen.lock().unwrap().insert(("?".into(), op));
            }
            let mut seen = self.seen.lock().unwrap();
            for (resource, action) in found {
                seen.insert((resource, action.to_string()));
            }
        }
    }

    impl Intercept for Recorder {
        fn name(&self) -> &'static str {
            "GrantRecorder"
        }

        fn read_before_serialization(
            &self,
            context: &BeforeSerializationInterceptorContextRef<'_>,
            _runtime_components: &RuntimeComponents,
            cfg: &mut ConfigBag,
        ) -> Result<(), BoxError> {
            self.record(context.input(), cfg);
            self.record_writes(context.input());
            Ok(())
        }
    }

    /// The attribute names an expression names directly (not `#placeholders`, `:values`,
    /// keywords or functions): `attribute_exists(pk) AND #s = :s` → `pk`.
    fn bare_names(expression: &str) -> Vec<String> {
        const WORDS: &[&str] = &[
            "SET",
            "REMOVE",
            "ADD",
            "DELETE",
            "AND",
            "OR",
            "NOT",
            "BETWEEN",
            "IN",
            "attribute_exists",
            "attribute_not_exists",
            "attribute_type",
            "begins_with",
            "contains",
            "size",
            "if_not_exists",
            "list_append",
        ];
        let mut out = Vec::new();
        let mut word = String::new();
        let mut placeholder = false;
        for c in expression.chars().chain([' ']) {
            if c.is_ascii_alphanumeric() || c == '_' {
                word.push(c);
                continue;
            }
            if !word.is_empty()
                && !placeholder
                && !WORDS.contains(&word.as_str())
                && !word.starts_with(|c: char| c.is_ascii_digit())
            {
                out.push(word.clone());
            }
            word.clear();
            placeholder = c == '#' || c == ':';
        }
        out
    }

    #[test]
    fn an_expression_names_its_bare_attributes_only() {
        assert_eq!(
            bare_names("SET #lk = :lk, list_sort = :ls REMOVE due_at"),
            ["list_sort", "due_at"]
        );
        assert_eq!(
            bare_names("attribute_exists(pk) AND attribute_not_exists(#lk)"),
            ["pk"]
        );
    }

    /// Each write a function made is allowed by its role, and the same write to another
    /// partition prefix is not ([`assert_held`]).
    fn assert_writes_held(function: &str, recorder: &Recorder) -> BTreeSet<ItemWrite> {
        let writes = recorder.writes();
        for w in &writes {
            assert!(
                HELD_TABLES.contains(&w.table.as_str()),
                "{function} wrote a table the roles do not hold: {w:?}"
            );
            assert!(
                !w.leading_keys.is_empty(),
                "{function}: a write with no key: {w:?}"
            );
            assert_held(function, w);
        }
        writes
    }

    /// Whether a recorded call is covered by the role: the exact resource, or the created
    /// resource of an `a | b` choice.
    fn covered(call: &(String, String), grants: &BTreeSet<(String, String)>) -> bool {
        grants.iter().any(|(resource, action)| {
            action == &call.1
                && resource
                    .split(" | ")
                    .next()
                    .is_some_and(|created| created == call.0)
        })
    }

    #[tokio::test]
    async fn every_aws_call_the_handlers_make_is_granted_to_their_function() {
        let t = TestStack::new().await;
        let clock = ManualClock::starting_now();
        let shared_clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let sender = t.config.notification_sender.clone();
        let recorders: BTreeMap<&str, Recorder> = functions()
            .into_iter()
            .map(|f| (f, Recorder::new(&t.stack, &sender)))
            .collect();
        let clients = |f: &str| recorders[f].clients(&t);

        // One webhook subscription, one change: ingest → dispatch → worker → prompt roll-up.
        let receiver = Receiver::start().await;
        receiver.set_default(Reply::Status(200));
        let fixtures = Fixtures {
            clients: &t.clients,
            table: &t.config.delivery_table,
            signing_key_id: &t.config.signing_key_id,
            now: clock.now(),
        };
        let account = fixtures.account(&["admin@example.com"]).await.unwrap();
        let hook = fixtures
            .webhook(&account.account_id, receiver.url("/hook"))
            .await
            .unwrap();
        fixtures
            .subscription(&hook, &["*"], None, &[], RetryPolicy::default())
            .await
            .unwrap();
        // And a built-in handler's (its record snapshots are the worker's puts).
        let snapshots = fixtures
            .integration(
                &account.account_id,
                shared::domain::delivery_method::DeliveryMethod::Internal,
                None,
                Some("record_snapshot"),
            )
            .await
            .unwrap();
        fixtures
            .subscription(&snapshots, &["*"], None, &[], RetryPolicy::default())
            .await
            .unwrap();
        let change = catalog_change(&account.account_id, clock.now(), 9.5);
        t.clients
            .dynamo
            .put_item()
            .table_name(&t.config.changes_table)
            .set_item(Some(serde_dynamo::to_item(&change).unwrap()))
            .send()
            .await
            .unwrap();
        let ingest = Ingest::new(
            clients("IngestFunction"),
            t.config.clone(),
            shared_clock.clone(),
        );
        let r = t
            .stream("ChangesTable")
            .drain(|e| ingest.handle(e))
            .await
            .unwrap();
        assert_eq!((r.records, r.failures), (1, 0));
        let dispatcher = Dispatcher::new(
            clients("DispatchFunction"),
            t.config.clone(),
            shared_clock.clone(),
        )
        .without_lookahead();
        let mut deliveries = t.mapped_stream("DeliveryTable", "DispatchFunction");
        deliveries
            .drain(|e| dispatcher.handle_stream(e))
            .await
            .unwrap();
        dispatcher.sweep().await.unwrap();
        let worker = DeliveryWorker::new(
            clients("DeliverFunction"),
            t.config.clone(),
            shared_clock.clone(),
        );
        let q = t
            .queue("DeliveryQueue")
            .drain(|e| worker.handle(e), 10)
            .await
            .unwrap();
        assert!(q.messages >= 1 && q.failures == 0, "{q:?}");
        assert_eq!(receiver.count(), 1);
        deliveries
            .drain(|e| dispatcher.handle_stream(e))
            .await
            .unwrap();

        // Reconciliation, as the schedule and the operator's route run it.
        for f in ["ReconcileFunction", "ApiFunction"] {
            let settler = reconcile_settler(&clients(f), &t.config, &shared_clock);
            let reconciler = Reconciler::new(
                clients(f),
                t.config.clone(),
                shared_clock.clone(),
                Some(Arc::new(settler)),
            );
            let report = reconciler
                .run(
                    RunKind::Nightly,
                    Budget::within(Duration::from_secs(60), 100),
                )
                .await;
            assert!(report.ok(), "{f}: {report:?}");
        }

        // A notice (the API creates it), its fan-out and email (the notification function).
        let _ = t
            .clients
            .ses
            .create_email_identity()
            .email_identity(&sender)
            .send()
            .await;
        let notices = NoticeService::new(
            NotificationTable::from_config(&clients("ApiFunction"), &t.config),
            shared_clock.clone(),
        );
        let notice = NewNotice {
            recipients: vec![Recipient::Contact(Contact {
                id: "admin".into(),
                email: Some("admin@example.com".into()),
                slack_webhook_url: None,
            })],
            channels: vec!["email".into(), "console".into()],
            subject: "Subject".into(),
            body: "Body".into(),
            deadline: None,
            supersede_key: None,
            idempotency_key: ulid::Ulid::new().to_string(),
            reason: None,
        };
        let (_, created) = notices.create(&account.account_id, notice).await.unwrap();
        assert!(created);
        let stream = NotificationStream::new(
            clients("NotifyFunction"),
            t.config.clone(),
            shared_clock.clone(),
        );
        let notify = NotificationWorker::new(
            clients("NotifyFunction"),
            t.config.clone(),
            shared_clock.clone(),
        );
        let mut tap = t.stream("NotificationTable");
        for _ in 0..4 {
            let r = tap.drain(|e| stream.handle(e)).await.unwrap();
            assert_eq!(r.failures, 0);
            t.queue("NotificationQueue")
                .drain(|e| notify.handle(e), 10)
                .await
                .unwrap();
        }

        for (function, recorder) in &recorders {
            let seen = recorder.seen();
            assert!(
                !seen.is_empty(),
                "{function} made no AWS call in the scenario"
            );
            let grants = granted(role_of(function));
            let ungranted: Vec<_> = seen.iter().filter(|c| !covered(c, &grants)).collect();
            assert!(
                ungranted.is_empty(),
                "{function} called what its role does not grant: {ungranted:#?}"
            );
        }
        // Each write was to a partition its role names, and no other would have been allowed.
        let mut written = BTreeSet::new();
        for (function, recorder) in &recorders {
            for w in assert_writes_held(function, recorder) {
                let (action, table, prefix) = w.kind();
                written.insert(format!("{function} {action} {table} {prefix}"));
            }
        }
        for kind in [
            "IngestFunction dynamodb:PutItem DeliveryTable EVT#",
            "DispatchFunction dynamodb:UpdateItem DeliveryTable EVT#",
            "DeliverFunction dynamodb:UpdateItem DeliveryTable EVT#",
            "DeliverFunction dynamodb:PutItem DeliveryTable SNAP#",
            "ReconcileFunction dynamodb:UpdateItem DeliveryTable ROLLUP_WALK",
            "ApiFunction dynamodb:PutItem NotificationTable NOTICE#",
            "NotifyFunction dynamodb:PutItem NotificationTable NOTICE#",
            "NotifyFunction dynamodb:UpdateItem NotificationTable NOTICE#",
            "NotifyFunction dynamodb:DeleteItem NotificationTable NOTICE#",
            "NotifyFunction dynamodb:PutItem NotificationTable PROVREF#",
        ] {
            assert!(
                written.contains(kind),
                "the scenario made no {kind}: {written:#?}"
            );
        }
        // The scenario reached the calls that matter for each function.
        let saw = |f: &str, resource: &str, action: &str| {
            assert!(
                recorders[f]
                    .seen()
                    .contains(&(resource.to_string(), action.to_string())),
                "{f} did not call {action} on {resource}"
            );
        };
        saw("IngestFunction", "DeliveryTable", "dynamodb:PutItem");
        saw("DispatchFunction", "DeliveryQueue", "sqs:SendMessage");
        saw(
            "DispatchFunction",
            "DeliveryTable/index/due",
            "dynamodb:Query",
        );
        saw("DeliverFunction", "DeliveryTable", "dynamodb:UpdateItem");
        saw("DeliverFunction", "SigningSecretsKey", "kms:Decrypt");
        saw(
            "ReconcileFunction",
            "DeliveryTable/index/rollup",
            "dynamodb:Query",
        );
        saw(
            "ReconcileFunction",
            "NotificationTable/index/watch",
            "dynamodb:Query",
        );
        saw("ApiFunction", "NotificationTable", "dynamodb:PutItem");
        saw("NotifyFunction", "NotificationQueue", "sqs:SendMessage");
        saw(
            "NotifyFunction",
            "ses:identity/${NotificationSenderAddress}",
            "ses:SendEmail",
        );
    }

    const OPERATOR_TOKEN: &str = "deployment-test-operator-token";

    /// One request to the API router; the status and the JSON body (Null when not JSON).
    async fn call(
        app: &axum::Router,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Json>,
    ) -> (u16, Json) {
        let mut b = Request::builder()
            .method(method)
            .uri(path)
            .header("idempotency-key", ulid::Ulid::new().to_string());
        if let Some(token) = token {
            b = b.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = match body {
            Some(v) => b
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(v.to_string())),
            None => b.body(Body::empty()),
        }
        .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or(Json::Null))
    }

    fn id_of(v: &Json, pointer: &str) -> String {
        v.pointer(pointer)
            .and_then(Json::as_str)
            .unwrap_or_else(|| panic!("no {pointer} in {v}"))
            .to_string()
    }

    /// Every route of the API's route table, called with this stack's real ids (deletes last),
    /// through clients whose calls are recorded: each must be one the API's role grants.
    #[tokio::test]
    async fn every_aws_call_the_api_routes_make_is_granted_to_the_api_function() {
        let t = TestStack::new().await;
        let recorder = Recorder::new(&t.stack, &t.config.notification_sender);
        let clock = ManualClock::starting_now();
        let state = ApiState::new(
            recorder.clients(&t),
            t.config.clone(),
            Arc::new(clock.clone()),
            OperatorAuth::static_token(OPERATOR_TOKEN, "ops@example.com"),
        );
        let app = local::api_server::app(state);
        let receiver = Receiver::start().await;
        receiver.set_default(Reply::Status(200));
        let op = Some(OPERATOR_TOKEN);

        // An account with a webhook and a poll subscription, made through the API.
        let (s, account) = call(
            &app,
            Method::POST,
            "/operator/accounts",
            op,
            Some(&serde_json::json!({"name": "Deploy", "admin_emails": ["admin@example.com"]})),
        )
        .await;
        assert_eq!(s, 201, "{account}");
        let account_id = id_of(&account, "/account/id");
        let token = id_of(&account, "/token");
        let tok = Some(token.as_str());
        let integration = |body: Json| {
            let app = &app;
            async move {
                let (s, v) = call(app, Method::POST, "/v1/integrations", tok, Some(&body)).await;
                assert_eq!(s, 201, "{v}");
                (id_of(&v, "/id"), id_of(&v, "/token"))
            }
        };
        let (webhook_id, _) = integration(serde_json::json!({"name": "CRM", "method": "webhook",
            "webhook_url": receiver.url("/hook"), "event_access_accepted": true}))
        .await;
        let (poll_id, poll_token) = integration(
            serde_json::json!({"name": "Puller", "method": "poll", "event_access_accepted": true}),
        )
        .await;
        let subscribe = |integration_id: String| {
            let app = &app;
            async move {
                let body = serde_json::json!({"integration_id": integration_id,
                    "record_types": ["*"], "fields": ["sku", "price"]});
                let (s, v) = call(app, Method::POST, "/v1/subscriptions", tok, Some(&body)).await;
                assert_eq!(s, 201, "{v}");
                id_of(&v, "/id")
            }
        };
        let webhook_sub = subscribe(webhook_id.clone()).await;
        let poll_sub = subscribe(poll_id).await;

        // A change through the pipeline (the other functions' part, not recorded here).
        let p = Pipeline::with_stack(t).await;
        let change = catalog_change(&id(&account_id), p.now(), 4.0);
        p.write_change(&change).await.unwrap();
        p.pump().await.unwrap();
        assert_eq!(receiver.count(), 1);
        // The API's clock after the change, so a replay window can cover it.
        clock.advance(Duration::from_secs(60));

        // A notice, a replay job: ids for their routes.
        let notice_body = serde_json::json!({"recipients": ["user-1"], "channels": ["console"],
            "subject": "Hello", "body": "Body"});
        let (s, notice) = call(&app, Method::POST, "/v1/notices", tok, Some(&notice_body)).await;
        assert_eq!(s, 202, "{notice}");
        let notice_id = id_of(&notice, "/id");
        let window = serde_json::json!({"from": clock.now().minus(shared::domain::time::HOUR).to_rfc3339(),
            "to": clock.now().to_rfc3339(), "reason": "deploy check"});
        let (s, job) = call(
            &app,
            Method::POST,
            &format!("/operator/accounts/{account_id}/subscriptions/{webhook_sub}/replays"),
            op,
            Some(&window),
        )
        .await;
        assert_eq!(s, 202, "{job}");
        let job_id = id_of(&job, "/id");

        let mut table = shared::api::routes::routes(&app).unwrap();
        // Deletes last, so every other route still finds what it names.
        table.sort_by_key(|(m, _)| *m == Method::DELETE);
        let mut answered = BTreeMap::new();
        for (method, template) in &table {
            let pull = template.starts_with("/v1/pull/");
            let path = template
                .replace("{account_id}", &account_id)
                .replace("{integration_id}", &webhook_id)
                .replace(
                    "{subscription_id}",
                    if pull { &poll_sub } else { &webhook_sub },
                )
                .replace("{change_id}", change.change_id.as_str())
                .replace("{event_id}", change.change_id.as_str())
                .replace("{job_id}", &job_id)
                .replace("{notice_id}", &notice_id)
                .replace("{delivery_key}", "console-user-1")
                .replace("{provider}", "test");
            let path = if template == "/v1/console/notices" {
                format!("{path}?recipient=user-1")
            } else {
                path
            };
            let token = if template.starts_with("/operator") {
                op
            } else if pull {
                Some(poll_token.as_str())
            } else {
                tok
            };
            let body = match (method.as_str(), template.as_str()) {
                (_, "/operator/accounts") => Some(serde_json::json!({"name": "Other"})),
                (_, "/v1/notices") => Some(notice_body.clone()),
                (_, "/operator/reconcile") => Some(serde_json::json!({"run": "nightly"})),
                ("POST", p) if p.ends_with("/replays") => Some(window.clone()),
                ("POST", p) if p.ends_with("/tokens") => Some(serde_json::json!({})),
                ("PUT", _) => Some(serde_json::json!({"cursor": "not-a-cursor"})),
                ("PATCH", _) => Some(serde_json::json!({"name": "Renamed"})),
                ("POST", _) => Some(serde_json::json!({"reason": "deploy check"})),
                _ => None,
            };
            let (status, reply) = call(&app, method.clone(), &path, token, body.as_ref()).await;
            assert!(status < 500, "{method} {path}: {status} {reply}");
            answered.insert(format!("{method} {template}"), status);
        }
        let ok = answered.values().filter(|s| **s < 300).count();
        assert!(
            table.len() >= 30 && ok * 3 >= table.len() * 2,
            "most routes succeed with real ids: {answered:#?}"
        );

        // Each write was to a partition the API's role names, and no other would have been.
        let written: BTreeSet<String> = assert_writes_held("ApiFunction", &recorder)
            .iter()
            .map(|w| {
                let (action, table, prefix) = w.kind();
                format!("{action} {table} {prefix}")
            })
            .collect();
        for kind in [
            "dynamodb:PutItem DeliveryTable ACCT#",
            "dynamodb:UpdateItem DeliveryTable ACCT#",
            "dynamodb:DeleteItem DeliveryTable ACCT#",
            "dynamodb:PutItem DeliveryTable TOKEN#",
            "dynamodb:PutItem DeliveryTable TOKENS#",
            "dynamodb:PutItem DeliveryTable AUDIT#",
            "dynamodb:PutItem DeliveryTable REPLAY#",
            "dynamodb:UpdateItem DeliveryTable EVT#",
            "dynamodb:UpdateItem DeliveryTable TESTQ#",
            "dynamodb:UpdateItem DeliveryTable ROLLUP_WALK",
            "dynamodb:PutItem NotificationTable NOTICE#",
        ] {
            assert!(
                written.contains(kind),
                "the routes made no {kind}: {written:#?}"
            );
        }
        let seen = recorder.seen();
        let grants = granted(role_of("ApiFunction"));
        let ungranted: Vec<_> = seen.iter().filter(|c| !covered(c, &grants)).collect();
        assert!(
            ungranted.is_empty(),
            "the API called what its role does not grant: {ungranted:#?}"
        );
        for (resource, action) in [
            ("DeliveryTable", "dynamodb:BatchGetItem"),
            ("DeliveryTable", "dynamodb:DeleteItem"),
            ("DeliveryTable/index/listing", "dynamodb:Query"),
            ("DeliveryTable/index/by_subscription", "dynamodb:Query"),
            ("NotificationTable/index/inbox", "dynamodb:Query"),
            // The operators' accounts and attention queue.
            ("NotificationTable/index/trouble", "dynamodb:Query"),
            // The operator's reconcile run.
            ("DeliveryTable/index/rollup", "dynamodb:Query"),
            ("NotificationTable/index/watch", "dynamodb:Query"),
            // Sealing the webhook's signing secret.
            ("SigningSecretsKey", "kms:GenerateDataKey"),
            // Queueing a test event for the delivery function.
            ("DeliveryQueue", "sqs:SendMessage"),
        ] {
            assert!(
                seen.contains(&(resource.to_string(), action.to_string())),
                "the routes never called {action} on {resource}: {seen:#?}"
            );
        }
    }
}

// ---------------------------------------------------------------- the dispatcher's filter

/// `old→new` status of a delivery-table stream record, with its event name, kind and method (for
/// an event: its push subscriber count): the kind of write it is.
fn write_kind(record: &Json) -> String {
    let image = |side: &str, attr: &str| {
        record["dynamodb"][side][attr]
            .as_object()
            .and_then(|v| v.values().next())
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_owned()
    };
    format!(
        "{} {} {}→{} {}",
        record["eventName"].as_str().unwrap_or(""),
        image("NewImage", "kind"),
        image("OldImage", "status"),
        image("NewImage", "status"),
        image("NewImage", "method") + &image("NewImage", "push_subscribers"),
    )
}

#[tokio::test]
async fn the_dispatchers_stream_filter_passes_exactly_the_records_its_code_acts_on() {
    use local::receiver::Reply;
    use local::testkit::api::OPERATOR_TOKEN;
    use local::testkit::World;
    use serde_json::json;
    use shared::domain::time::{MINUTE, SECOND};

    let w = World::new().await;
    w.receiver.set_default(Reply::Status(503));
    let tenant = w.api.account("Tenant").await;
    let push = w
        .subscribe_through_api(
            &tenant,
            "webhook",
            json!({"retry_policy": {"kind": "exponential", "max_retries": 2, "retry_delay_secs": 60}}),
        )
        .await;
    let pull = w.subscribe_through_api(&tenant, "poll", json!({})).await;
    let nobody = w.api.account("Nobody subscribes").await;
    // Claims, a first failure, a retry's claim, death; an event nobody pushes to.
    let changes = w
        .write_changes(&tenant.account_id, &[w.pipeline.now()])
        .await;
    w.write_changes(&nobody.account_id, &[w.pipeline.now()])
        .await;
    w.pipeline.advance(2 * MINUTE).await.unwrap();
    // An operator's restart, then success.
    w.receiver.set_default(Reply::Status(200));
    let retry = format!(
        "/operator/accounts/{}/subscriptions/{}/deliveries/{}/retry",
        push.account_id, push.subscription_id, changes[0].change_id
    );
    w.api
        .post(&retry, OPERATOR_TOKEN, json!({"reason": "receiver back"}))
        .await
        .ok();
    w.pipeline.pump().await.unwrap();
    // The pull delivery is read and acknowledged through the cursor.
    w.pipeline.clock.advance(3 * SECOND);
    let pull_path = |rest: &str| format!("/v1/pull/subscriptions/{}/{rest}", pull.subscription_id);
    let page = w
        .api
        .get(&pull_path("changes"), &pull.integration_token)
        .await;
    let cursor = page.ok()["next_cursor"].clone();
    w.api
        .put(
            &pull_path("cursor"),
            &pull.integration_token,
            json!({"cursor": cursor}),
        )
        .await
        .ok();
    w.pipeline.pump().await.unwrap();

    let patterns = local::template::Template::load_project()
        .unwrap()
        .stream_filter("DispatchFunction")
        .expect("the dispatcher's stream event has FilterCriteria")
        .to_vec();
    let records = w
        .pipeline
        .stack
        .stream("DeliveryTable")
        .peek()
        .await
        .unwrap();
    let mut seen = BTreeMap::<String, bool>::new();
    for (json, record) in &records {
        let by_template = local::event_filter::passes(&patterns, json);
        let by_code = shared::delivery::route::wanted(record);
        assert_eq!(by_template, by_code, "{}: {json}", write_kind(json));
        seen.insert(write_kind(json), by_code);
    }
    // Every kind of write happened, and each went the way it should.
    for (kind, passed) in [
        ("INSERT delivery →pending webhook", true),
        ("MODIFY delivery pending→pending webhook", false),
        ("MODIFY delivery pending→retrying webhook", true),
        ("MODIFY delivery retrying→retrying webhook", false),
        ("MODIFY delivery retrying→dead webhook", true),
        ("MODIFY delivery dead→pending webhook", true),
        ("MODIFY delivery pending→delivered webhook", true),
        ("INSERT delivery →pending poll", false),
        ("MODIFY delivery pending→delivered poll", false),
        ("INSERT event → 0", true),
        ("INSERT event → 1", false),
        ("MODIFY delivery pending→pending poll", false),
        ("MODIFY subscription active→active ", false),
    ] {
        assert_eq!(seen.get(kind), Some(&passed), "{kind}; seen: {seen:#?}");
    }
}

// ------------------------------------------------------------------ the functions' allocator

/// Every deployed function allocates through `shared::alloc::Allocator` (mimalloc), the
/// allocator the bench's counting allocator forwards to: a function built on glibc's malloc
/// would run slower than the bench says (BENCHMARKS.md, "The allocator").
#[test]
fn every_deployed_function_runs_on_the_allocator_and_runtime_the_bench_measures() {
    let installs = |main: &str| {
        let mut lines = main.lines().map(str::trim);
        while let Some(line) = lines.next() {
            if line == "#[global_allocator]" {
                return lines.next().is_some_and(|next| {
                    next.starts_with("static ")
                        && next.ends_with("shared::alloc::Allocator = shared::alloc::Allocator;")
                });
            }
        }
        false
    };
    let functions = functions();
    assert!(functions.len() >= 6, "{functions:?}");
    for function in functions {
        let binary = resource(function)["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or_else(|| panic!("{function} names no Binary"));
        let main = read(&format!("functions/{binary}/src/main.rs"));
        assert!(
            installs(&main),
            "functions/{binary}/src/main.rs ({function}) does not install shared::alloc::Allocator"
        );
        // The functions on a delivery's path run the runtime flavour the bench measured cheapest.
        if ["ingest", "dispatch", "deliver"].contains(&binary) {
            assert!(
                main.contains("#[tokio::main(flavor = \"current_thread\")]"),
                "functions/{binary}/src/main.rs runs a current-thread runtime"
            );
        }
    }
}

// ------------------------------------------------ the delivery table on provisioned capacity

/// `DeliveryTableCapacity: provisioned` bills the delivery table by the hour (BENCHMARKS.md,
/// "Provisioned capacity"): the table and every one of its indexes get capacity, and each of
/// them, reads and writes, is target-tracked at 70 % between the two bounds; an index left
/// unscaled would throttle the table's writes once traffic outgrew its minimum. On-demand stays
/// the default, and throttling is alarmed in either mode.
#[test]
fn the_delivery_table_can_run_on_provisioned_capacity_with_the_table_and_every_index_scaled() {
    let parameter = &template()["Parameters"]["DeliveryTableCapacity"];
    assert_eq!(parameter["Default"], "on-demand");
    assert_eq!(
        strings(&parameter["AllowedValues"]),
        ["on-demand", "provisioned"]
    );
    let condition = &template()["Conditions"]["ProvisionedDeliveryTable"];
    let (tag, args) = tagged(condition).expect("ProvisionedDeliveryTable is !Equals");
    assert_eq!(tag, "!Equals");
    assert!(is_ref(&args[0], "DeliveryTableCapacity") && args[1] == "provisioned");

    let provisioned_or_nothing = |v: &Value, what: &str| {
        let (tag, args) = tagged(v).unwrap_or_else(|| panic!("{what}: not an !If"));
        assert_eq!(tag, "!If", "{what}");
        assert_eq!(args[0], "ProvisionedDeliveryTable", "{what}");
        for units in ["ReadCapacityUnits", "WriteCapacityUnits"] {
            assert!(
                is_ref(&args[1][units], "DeliveryTableMinCapacity"),
                "{what}: {units}"
            );
        }
        assert!(is_ref(&args[2], "AWS::NoValue"), "{what}");
    };
    let table = &resource("DeliveryTable")["Properties"];
    assert_eq!(
        canonical(&table["BillingMode"]),
        "PROVISIONED | PAY_PER_REQUEST"
    );
    provisioned_or_nothing(&table["ProvisionedThroughput"], "the table");
    let mut scaled = vec!["table/${DeliveryTable}".to_string()];
    for index in list(&table["GlobalSecondaryIndexes"]) {
        let name = index["IndexName"].as_str().expect("IndexName");
        provisioned_or_nothing(&index["ProvisionedThroughput"], name);
        scaled.push(format!("table/${{DeliveryTable}}/index/{name}"));
    }
    assert_eq!(scaled.len(), 5, "{scaled:?}");

    let targets = of_type("AWS::ApplicationAutoScaling::ScalableTarget");
    let policies = of_type("AWS::ApplicationAutoScaling::ScalingPolicy");
    for resource_id in &scaled {
        let kind = if resource_id.contains("/index/") {
            "index"
        } else {
            "table"
        };
        for units in ["Read", "Write"] {
            let dimension = format!("dynamodb:{kind}:{units}CapacityUnits");
            let found: Vec<_> = targets
                .iter()
                .filter(|(_, t)| {
                    let p = &t["Properties"];
                    canonical(&p["ResourceId"]) == *resource_id
                        && p["ScalableDimension"] == dimension
                })
                .collect();
            assert_eq!(found.len(), 1, "{resource_id} {dimension}: {found:?}");
            let (id, t) = found[0];
            let p = &t["Properties"];
            assert_eq!(t["Condition"], "ProvisionedDeliveryTable", "{id}");
            assert_eq!(p["ServiceNamespace"], "dynamodb", "{id}");
            assert!(
                is_ref(&p["MinCapacity"], "DeliveryTableMinCapacity"),
                "{id}"
            );
            assert!(
                is_ref(&p["MaxCapacity"], "DeliveryTableMaxCapacity"),
                "{id}"
            );
            let tracking: Vec<_> = policies
                .iter()
                .filter(|(_, policy)| target(&policy["Properties"]["ScalingTargetId"]) == Some(id))
                .collect();
            assert_eq!(tracking.len(), 1, "{id}: {tracking:?}");
            let (policy_id, policy) = tracking[0];
            let p = &policy["Properties"];
            assert_eq!(
                policy["Condition"], "ProvisionedDeliveryTable",
                "{policy_id}"
            );
            assert_eq!(p["PolicyType"], "TargetTrackingScaling", "{policy_id}");
            let config = &p["TargetTrackingScalingPolicyConfiguration"];
            assert_eq!(config["TargetValue"].as_f64(), Some(70.0), "{policy_id}");
            assert_eq!(
                config["PredefinedMetricSpecification"]["PredefinedMetricType"],
                format!("DynamoDB{units}CapacityUtilization").as_str(),
                "{policy_id}"
            );
        }
    }
    assert_eq!(targets.len(), 10, "nothing else is scaled");

    for metric in ["WriteThrottleEvents", "ReadThrottleEvents"] {
        assert!(
            alarm_on("AWS/DynamoDB", metric, "TableName", "DeliveryTable"),
            "{metric}"
        );
    }
}

// ------------------------------------- the API cannot be flooded: throttles, concurrency, edge

#[test]
fn the_unauthenticated_routes_have_their_own_lower_throttles_and_the_api_reserves_its_concurrency()
{
    let stages = translated_of_type("AWS::ApiGatewayV2::Stage");
    let [(_, stage)] = stages.as_slice() else {
        panic!("one HTTP API stage: {stages:?}")
    };
    let default = &stage["Properties"]["DefaultRouteSettings"];
    let default_rate = default["ThrottlingRateLimit"]
        .as_f64()
        .expect("a default rate");
    let routes = &stage["Properties"]["RouteSettings"];
    for key in ["ANY /console/login", "POST /v1/provider-events/{provider}"] {
        let rate = routes[key]["ThrottlingRateLimit"]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} has its own throttle: {routes}"));
        let burst = routes[key]["ThrottlingBurstLimit"]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} has its own burst"));
        assert!(rate > 0.0 && rate < default_rate, "{key}: {rate}");
        assert!(
            burst > 0.0 && burst < default["ThrottlingBurstLimit"].as_f64().unwrap(),
            "{key}: {burst}"
        );
    }
    // Each throttled route is a route of the API (a route setting of no route fails the deploy).
    let apis = translated_of_type("AWS::ApiGatewayV2::Api");
    let paths = &apis[0].1["Properties"]["Body"]["paths"];
    assert!(paths["/console/login"]["x-amazon-apigateway-any-method"].is_object());
    assert!(paths["/v1/provider-events/{provider}"]["post"].is_object());
    // The API function keeps a reserved share of the account's concurrency.
    let reserved = &resource("ApiFunction")["Properties"]["ReservedConcurrentExecutions"];
    assert!(is_ref(reserved, "ApiReservedConcurrency"), "{reserved:?}");
    let parameter = &template()["Parameters"]["ApiReservedConcurrency"];
    assert!(parameter["Default"].as_u64().unwrap() >= 1);
    assert!(parameter["MinValue"].as_u64().unwrap() >= 1);
    // And the per-account caps reach the function from parameters.
    let env = &resource("ApiFunction")["Properties"]["Environment"]["Variables"];
    for (var, parameter, default) in [
        ("ACCOUNT_MAX_INTEGRATIONS", "AccountMaxIntegrations", 50),
        ("ACCOUNT_MAX_SUBSCRIPTIONS", "AccountMaxSubscriptions", 200),
        ("ACCOUNT_MAX_LIVE_TOKENS", "AccountMaxLiveTokens", 50),
        (
            "ACCOUNT_MAX_REQUESTS_PER_SECOND",
            "AccountMaxRequestsPerSecond",
            50,
        ),
    ] {
        assert!(is_ref(&env[var], parameter), "{var}");
        assert_eq!(
            template()["Parameters"][parameter]["Default"].as_u64(),
            Some(default),
            "{parameter}"
        );
    }
    // The function's defaults are the template's, so a stack that sets no parameter and the
    // local stacks (which read the defaults) agree.
    let d = shared::config::DEFAULT_ACCOUNT_LIMITS;
    for (parameter, default) in [
        ("AccountMaxIntegrations", d.integrations),
        ("AccountMaxSubscriptions", d.subscriptions),
        ("AccountMaxLiveTokens", d.live_tokens),
        ("AccountMaxRequestsPerSecond", d.requests_per_second),
    ] {
        assert_eq!(
            template()["Parameters"][parameter]["Default"].as_u64(),
            Some(u64::from(default)),
            "{parameter}"
        );
    }
    // One account's rate stays below the route throttle every tenant shares: it cannot use the
    // whole of it, even at the highest default an operator would leave.
    assert!(
        f64::from(d.requests_per_second) < default_rate,
        "the per-account rate is below the shared route throttle"
    );
}

/// Whether a template condition holds when the parameters take `values` (or their defaults).
fn template_condition_holds(doc: &Value, condition: &Value, values: &BTreeMap<&str, &str>) -> bool {
    let value_of = |v: &Value| -> String {
        match tagged(v) {
            Some((tag, name)) if tag == "!Ref" => {
                let name = name.as_str().unwrap();
                match values.get(name) {
                    Some(v) => v.to_string(),
                    None => match &doc["Parameters"][name]["Default"] {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        other => panic!("parameter {name} has no default: {other:?}"),
                    },
                }
            }
            _ => match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => panic!("not a value: {other:?}"),
            },
        }
    };
    let (tag, args) = tagged(condition).expect("a condition function");
    let args = list(args);
    match tag.as_str() {
        "!Equals" => value_of(args[0]) == value_of(args[1]),
        "!Not" => !template_condition_holds(doc, args[0], values),
        "!And" => args
            .iter()
            .all(|a| template_condition_holds(doc, a, values)),
        "!Or" => args
            .iter()
            .any(|a| template_condition_holds(doc, a, values)),
        "!Condition" => {
            template_condition_holds(doc, &doc["Conditions"][args[0].as_str().unwrap()], values)
        }
        other => panic!("no evaluation of {other}"),
    }
}

/// The resources a deployment of `template.yaml` with `values` creates: `(id, type)`.
fn deployed(values: &[(&str, &str)]) -> BTreeMap<String, String> {
    let doc = template();
    let values: BTreeMap<&str, &str> = values.iter().copied().collect();
    resources()
        .filter(|(_, r)| match r["Condition"].as_str() {
            None => true,
            Some(name) => template_condition_holds(doc, &doc["Conditions"][name], &values),
        })
        .map(|(id, r)| (id.to_string(), r["Type"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn waf_rate_rules_per_address_and_per_credential_front_the_api_when_edge_protection_is_on_as_in_staging_and_prod(
) {
    let edge_types = [
        "AWS::CloudFront::Distribution",
        "AWS::WAFv2::WebACL",
        "AWS::WAFv2::LoggingConfiguration",
    ];
    let off = deployed(&[]);
    for kind in edge_types {
        assert!(
            !off.values().any(|t| t == kind),
            "off by default, yet {kind} is deployed"
        );
    }
    assert!(off.contains_key("ApiFunction") && off.contains_key("HttpApi"));
    let on = deployed(&[("EdgeProtection", "true")]);
    for kind in edge_types {
        assert!(on.values().any(|t| t == kind), "on: {kind} is deployed");
    }
    assert_eq!(
        on.len(),
        off.len() + 4,
        "the distribution, the web ACL, its logging and log group"
    );

    // The web ACL: rate-based rules per client IP that block, one of them on the sign-in path,
    // for CloudFront; the distribution uses it and reaches the HTTP API over HTTPS only.
    let acl = &resource("EdgeWebAcl")["Properties"];
    assert_eq!(acl["Scope"], "CLOUDFRONT");
    let rules = list(&acl["Rules"]);
    let rate_rules: Vec<&Value> = rules
        .iter()
        .copied()
        .filter(|r| !r["Statement"]["RateBasedStatement"].is_null())
        .collect();
    assert!(rate_rules.len() >= 3, "{rules:?}");
    for rule in &rate_rules {
        assert!(!rule["Action"]["Block"].is_null(), "{rule:?}");
    }
    let rule_limited_by = |parameter: &str| -> &Value {
        let rule = rate_rules
            .iter()
            .find(|r| is_ref(&r["Statement"]["RateBasedStatement"]["Limit"], parameter))
            .unwrap_or_else(|| panic!("no rate rule limited by {parameter}"));
        &rule["Statement"]["RateBasedStatement"]
    };
    // Per address, overall and on the sign-in page ...
    assert_eq!(
        rule_limited_by("EdgeRateLimitPerIp")["AggregateKeyType"],
        "IP"
    );
    let login = rule_limited_by("EdgeLoginRateLimitPerIp");
    assert_eq!(login["AggregateKeyType"], "IP");
    assert_eq!(
        login["ScopeDownStatement"]["ByteMatchStatement"]["SearchString"],
        "/console/login"
    );
    // ... and per credential: the Authorization header's value as it is, whatever address
    // sends it, so one token cannot flood from many addresses.
    let credential = rule_limited_by("EdgeRateLimitPerCredential");
    assert_eq!(credential["AggregateKeyType"], "CUSTOM_KEYS");
    let keys = list(&credential["CustomKeys"]);
    assert_eq!(keys.len(), 1, "{keys:?}");
    let header = &keys[0]["Header"];
    assert_eq!(
        header["Name"]
            .as_str()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("authorization")
    );
    assert_eq!(list(&header["TextTransformations"])[0]["Type"], "NONE");
    // Sane limits: WAF's floor of 10, the sign-in page lowest, one credential below one address.
    let default = |p: &str| template()["Parameters"][p]["Default"].as_u64().unwrap();
    for p in [
        "EdgeRateLimitPerIp",
        "EdgeLoginRateLimitPerIp",
        "EdgeRateLimitPerCredential",
    ] {
        assert!(
            template()["Parameters"][p]["MinValue"].as_u64() >= Some(10),
            "{p}"
        );
    }
    assert!(default("EdgeLoginRateLimitPerIp") < default("EdgeRateLimitPerCredential"));
    assert!(default("EdgeRateLimitPerCredential") <= default("EdgeRateLimitPerIp"));
    let distribution = &resource("EdgeDistribution")["Properties"]["DistributionConfig"];
    assert_eq!(target(&distribution["WebACLId"]), Some("EdgeWebAcl"));
    let origin = list(&distribution["Origins"])[0];
    assert!(canonical(&origin["DomainName"]).contains("${HttpApi}.execute-api"));
    assert_eq!(
        origin["CustomOriginConfig"]["OriginProtocolPolicy"],
        "https-only"
    );
    assert_eq!(
        distribution["DefaultCacheBehavior"]["ViewerProtocolPolicy"],
        "https-only"
    );
    // Only where WAF for CloudFront exists, and the deploying guide says how to turn it on.
    let rule = &template()["Rules"]["EdgeProtectionNeedsUsEast1"];
    assert!(!rule["Assertions"].is_null());
    let guide = read("docs/deploy.md");
    assert!(
        guide.contains("EdgeProtection=true"),
        "docs/deploy.md says how to turn edge protection on"
    );
    // staging and prod run behind the edge, in the region WAF for CloudFront needs.
    let config = samconfig();
    for stage in ["staging", "prod"] {
        let deploy = &config[&format!("{stage}.deploy.parameters")];
        assert!(
            deploy["parameter_overrides"].contains("EdgeProtection=\"true\""),
            "{stage} runs behind the edge"
        );
        assert_eq!(deploy["region"], "us-east-1", "{stage}");
    }
}

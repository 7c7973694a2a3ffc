//! Reads `template.yaml`: the DynamoDB tables, SQS queues, KMS keys, functions and function
//! environment it declares.
//! The harness provisions exactly these, so the template stays the single source of truth.

use serde::Deserialize;
use serde_yaml::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("template.yaml is not valid YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("resource {resource}: {message}")]
    Resource { resource: String, message: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct KeyElement {
    pub attribute: String,
    /// `HASH` or `RANGE`.
    pub key_type: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpec {
    pub name: String,
    pub keys: Vec<KeyElement>,
    /// `ALL`, `KEYS_ONLY` or `INCLUDE`.
    pub projection: String,
    pub non_key_attributes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TableSpec {
    pub logical_id: String,
    /// Attribute name → `S`, `N` or `B`.
    pub attributes: BTreeMap<String, String>,
    pub keys: Vec<KeyElement>,
    pub global_indexes: Vec<IndexSpec>,
    pub stream_view: Option<String>,
    pub ttl_attribute: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct QueueSpec {
    pub logical_id: String,
    pub visibility_timeout: Option<u32>,
    pub retention_seconds: Option<u32>,
    /// Logical id of the dead-letter queue and the receive count that sends a message there.
    pub redrive: Option<(String, u32)>,
}

/// A function environment value as the template states it.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvValue {
    Literal(String),
    /// `!Ref X`: a resource (its physical name or URL) or a parameter.
    Ref(String),
}

/// A function (`AWS::Serverless::Function`) as Lambda runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionSpec {
    pub logical_id: String,
    /// The executable `cargo lambda` builds for it (`Metadata.BuildProperties.Binary`).
    pub binary: String,
    /// Its own `Environment.Variables`, which Lambda sets over the Globals ones.
    pub environment: BTreeMap<String, EnvValue>,
    pub memory_mb: u32,
    /// How long an invocation may run: what its deadline is set to.
    pub timeout_seconds: u32,
}

/// Lambda's own settings for a function that names none (and whose Globals name none).
const DEFAULT_MEMORY_MB: u32 = 128;
const DEFAULT_TIMEOUT_SECONDS: u32 = 3;

#[derive(Debug, Clone)]
pub struct Template {
    pub tables: Vec<TableSpec>,
    pub queues: Vec<QueueSpec>,
    /// Logical ids of the KMS keys (`AWS::KMS::Key`).
    pub kms_keys: Vec<String>,
    /// `Globals.Function.Environment.Variables`.
    pub function_env: BTreeMap<String, EnvValue>,
    pub functions: Vec<FunctionSpec>,
    /// Parameter defaults.
    pub parameters: BTreeMap<String, String>,
    /// Function logical id → the `FilterCriteria` patterns of its DynamoDB stream event, parsed
    /// from their JSON text (see [`crate::event_filter`]).
    pub stream_filters: BTreeMap<String, Vec<serde_json::Value>>,
}

impl Template {
    /// The repository's `template.yaml`, found from this crate's directory.
    pub fn project_path() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml")
    }

    pub fn load_project() -> Result<Self, TemplateError> {
        Self::load(&Self::project_path())
    }

    pub fn load(path: &Path) -> Result<Self, TemplateError> {
        let text = std::fs::read_to_string(path).map_err(|source| TemplateError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text)
    }

    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let doc: Value = serde_yaml::from_str(text)?;
        let mut parameters = BTreeMap::new();
        if let Some(params) = doc.get("Parameters").and_then(Value::as_mapping) {
            for (name, spec) in params {
                if let Some(default) = spec.get("Default").and_then(scalar) {
                    parameters.insert(name.as_str().unwrap_or_default().to_string(), default);
                }
            }
        }
        let conditions = Conditions {
            defined: doc.get("Conditions").cloned().unwrap_or(Value::Null),
            parameters: &parameters,
        };
        let mut tables = Vec::new();
        let mut queues = Vec::new();
        let mut kms_keys = Vec::new();
        let mut stream_filters = BTreeMap::new();
        let mut functions = Vec::new();
        let globals = doc.get("Globals").and_then(|g| g.get("Function"));
        let global_number = |key: &str, default: u32| {
            globals
                .and_then(|g| g.get(key))
                .and_then(Value::as_u64)
                .map_or(default, |n| n as u32)
        };
        let (memory_mb, timeout_seconds) = (
            global_number("MemorySize", DEFAULT_MEMORY_MB),
            global_number("Timeout", DEFAULT_TIMEOUT_SECONDS),
        );
        if let Some(resources) = doc.get("Resources").and_then(Value::as_mapping) {
            for (id, resource) in resources {
                let id = id.as_str().unwrap_or_default().to_string();
                // A resource whose condition is false (with the parameters' defaults) is not
                // deployed, so not provisioned either.
                if let Some(condition) = resource.get("Condition").and_then(Value::as_str) {
                    if !conditions.holds(condition)? {
                        continue;
                    }
                }
                let props = resource.get("Properties").cloned().unwrap_or(Value::Null);
                match resource.get("Type").and_then(Value::as_str) {
                    Some("AWS::DynamoDB::Table") => tables.push(table_spec(&id, &props)?),
                    Some("AWS::SQS::Queue") => queues.push(queue_spec(&id, &props)?),
                    Some("AWS::KMS::Key") => kms_keys.push(id),
                    Some("AWS::Serverless::Function") => {
                        if let Some(patterns) = stream_filter_patterns(&id, &props)? {
                            stream_filters.insert(id.clone(), patterns);
                        }
                        let number = |key: &str, default: u32| {
                            props
                                .get(key)
                                .and_then(Value::as_u64)
                                .map_or(default, |n| n as u32)
                        };
                        functions.push(FunctionSpec {
                            binary: resource
                                .get("Metadata")
                                .and_then(|m| m.get("BuildProperties"))
                                .and_then(|b| b.get("Binary"))
                                .and_then(Value::as_str)
                                .ok_or_else(|| TemplateError::Resource {
                                    resource: id.clone(),
                                    message: "no Metadata.BuildProperties.Binary".into(),
                                })?
                                .to_string(),
                            environment: environment(props.get("Environment"), &conditions)?,
                            memory_mb: number("MemorySize", memory_mb),
                            timeout_seconds: number("Timeout", timeout_seconds),
                            logical_id: id.clone(),
                        });
                    }
                    _ => {}
                }
            }
        }
        let function_env = environment(globals.and_then(|f| f.get("Environment")), &conditions)?;
        Ok(Template {
            tables,
            queues,
            kms_keys,
            function_env,
            functions,
            parameters,
            stream_filters,
        })
    }

    /// The `FilterCriteria` patterns of `function`'s DynamoDB stream event (none: it has no
    /// filtered stream event).
    pub fn stream_filter(&self, function: &str) -> Option<&[serde_json::Value]> {
        self.stream_filters.get(function).map(Vec::as_slice)
    }

    pub fn table(&self, logical_id: &str) -> Option<&TableSpec> {
        self.tables.iter().find(|t| t.logical_id == logical_id)
    }

    pub fn queue(&self, logical_id: &str) -> Option<&QueueSpec> {
        self.queues.iter().find(|q| q.logical_id == logical_id)
    }

    pub fn function(&self, logical_id: &str) -> Option<&FunctionSpec> {
        self.functions.iter().find(|f| f.logical_id == logical_id)
    }
}

/// The `Variables` of an `Environment` (none without one), each `!If` decided by the defaults.
fn environment(
    environment: Option<&Value>,
    conditions: &Conditions,
) -> Result<BTreeMap<String, EnvValue>, TemplateError> {
    let mut variables = BTreeMap::new();
    let declared = environment
        .and_then(|e| e.get("Variables"))
        .and_then(Value::as_mapping);
    for (name, value) in declared.into_iter().flatten() {
        let name = name.as_str().unwrap_or_default().to_string();
        let value = match value {
            Value::Tagged(tagged) if tagged.tag == "!If" => {
                conditions.env_branch(&name, &tagged.value)?
            }
            other => env_value(other),
        };
        variables.insert(name, value);
    }
    Ok(variables)
}

/// The filter patterns of a function's DynamoDB event, if it has one with `FilterCriteria`.
fn stream_filter_patterns(
    id: &str,
    props: &Value,
) -> Result<Option<Vec<serde_json::Value>>, TemplateError> {
    let events = props.get("Events").and_then(Value::as_mapping);
    let Some(stream) = events.into_iter().flatten().map(|(_, e)| e).find(|e| {
        e.get("Type").and_then(Value::as_str) == Some("DynamoDB")
            && e.get("Properties")
                .and_then(|p| p.get("FilterCriteria"))
                .is_some()
    }) else {
        return Ok(None);
    };
    let filters = stream["Properties"]["FilterCriteria"]["Filters"]
        .as_sequence()
        .cloned()
        .unwrap_or_default();
    let bad = |message: String| TemplateError::Resource {
        resource: id.to_string(),
        message,
    };
    filters
        .iter()
        .map(|f| {
            let text = f
                .get("Pattern")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("a filter without a Pattern string".into()))?;
            serde_json::from_str(text).map_err(|e| bad(format!("filter pattern {text}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn env_value(value: &Value) -> EnvValue {
    match value {
        Value::Tagged(tagged) if tagged.tag == "!Ref" => {
            EnvValue::Ref(tagged.value.as_str().unwrap_or_default().to_string())
        }
        other => EnvValue::Literal(scalar(other).unwrap_or_default()),
    }
}

/// The template's `Conditions`, evaluated with the parameters' defaults (what a deployment
/// without overrides gets): `!Equals`, `!Not`, `!And`, `!Or`, `!Condition` over `!Ref`s of
/// parameters and literals.
struct Conditions<'a> {
    defined: Value,
    parameters: &'a BTreeMap<String, String>,
}

impl Conditions<'_> {
    fn error(&self, message: String) -> TemplateError {
        TemplateError::Resource {
            resource: "Conditions".into(),
            message,
        }
    }

    fn holds(&self, name: &str) -> Result<bool, TemplateError> {
        let expression = self
            .defined
            .get(name)
            .ok_or_else(|| self.error(format!("no condition {name}")))?;
        self.eval(expression)
    }

    fn eval(&self, expression: &Value) -> Result<bool, TemplateError> {
        let Value::Tagged(tagged) = expression else {
            return Err(self.error(format!("not a condition: {expression:?}")));
        };
        let args = || tagged.value.as_sequence().cloned().unwrap_or_default();
        match tagged.tag.to_string().as_str() {
            "!Equals" => match args().as_slice() {
                [a, b] => Ok(self.value(a)? == self.value(b)?),
                _ => Err(self.error("!Equals takes two values".into())),
            },
            "!Not" => match args().as_slice() {
                [c] => Ok(!self.eval(c)?),
                _ => Err(self.error("!Not takes one condition".into())),
            },
            "!And" => args()
                .iter()
                .try_fold(true, |all, c| Ok(all && self.eval(c)?)),
            "!Or" => args()
                .iter()
                .try_fold(false, |any, c| Ok(any || self.eval(c)?)),
            "!Condition" => self.holds(tagged.value.as_str().unwrap_or_default()),
            other => Err(self.error(format!("condition function {other} is not supported"))),
        }
    }

    fn value(&self, v: &Value) -> Result<String, TemplateError> {
        match v {
            Value::Tagged(t) if t.tag == "!Ref" => {
                let name = t.value.as_str().unwrap_or_default();
                self.parameters
                    .get(name)
                    .cloned()
                    .ok_or_else(|| self.error(format!("!Ref {name}: no parameter default")))
            }
            other => scalar(other).ok_or_else(|| self.error(format!("not a value: {other:?}"))),
        }
    }

    /// The branch of `!If [condition, then, else]` a deployment with the defaults takes.
    fn env_branch(&self, var: &str, args: &Value) -> Result<EnvValue, TemplateError> {
        match args.as_sequence().map(Vec::as_slice) {
            Some([Value::String(condition), then, otherwise]) => {
                Ok(env_value(if self.holds(condition)? {
                    then
                } else {
                    otherwise
                }))
            }
            _ => Err(self.error(format!("{var}: !If takes a condition name and two values"))),
        }
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawKey {
    attribute_name: String,
    key_type: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawAttribute {
    attribute_name: String,
    attribute_type: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawProjection {
    projection_type: String,
    #[serde(default)]
    non_key_attributes: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawIndex {
    index_name: String,
    key_schema: Vec<RawKey>,
    projection: RawProjection,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawTable {
    attribute_definitions: Vec<RawAttribute>,
    key_schema: Vec<RawKey>,
    #[serde(default)]
    global_secondary_indexes: Vec<RawIndex>,
    stream_specification: Option<RawStream>,
    time_to_live_specification: Option<RawTtl>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawStream {
    stream_view_type: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawTtl {
    attribute_name: String,
    enabled: bool,
}

fn keys(raw: Vec<RawKey>) -> Vec<KeyElement> {
    raw.into_iter()
        .map(|k| KeyElement {
            attribute: k.attribute_name,
            key_type: k.key_type,
        })
        .collect()
}

fn table_spec(id: &str, props: &Value) -> Result<TableSpec, TemplateError> {
    // The parts of a table that provisioning needs are plain YAML (no intrinsic functions).
    let raw: RawTable =
        serde_yaml::from_value(props.clone()).map_err(|e| TemplateError::Resource {
            resource: id.to_string(),
            message: e.to_string(),
        })?;
    Ok(TableSpec {
        logical_id: id.to_string(),
        attributes: raw
            .attribute_definitions
            .into_iter()
            .map(|a| (a.attribute_name, a.attribute_type))
            .collect(),
        keys: keys(raw.key_schema),
        global_indexes: raw
            .global_secondary_indexes
            .into_iter()
            .map(|i| IndexSpec {
                name: i.index_name,
                keys: keys(i.key_schema),
                projection: i.projection.projection_type,
                non_key_attributes: i.projection.non_key_attributes,
            })
            .collect(),
        stream_view: raw.stream_specification.map(|s| s.stream_view_type),
        ttl_attribute: raw
            .time_to_live_specification
            .filter(|t| t.enabled)
            .map(|t| t.attribute_name),
    })
}

fn queue_spec(id: &str, props: &Value) -> Result<QueueSpec, TemplateError> {
    let number = |key: &str| props.get(key).and_then(Value::as_u64).map(|n| n as u32);
    let redrive = match props.get("RedrivePolicy") {
        None => None,
        Some(policy) => {
            let target = match policy.get("deadLetterTargetArn") {
                Some(Value::Tagged(t)) if t.tag == "!GetAtt" => t
                    .value
                    .as_str()
                    .and_then(|s| s.strip_suffix(".Arn"))
                    .map(str::to_string),
                _ => None,
            };
            let max = policy.get("maxReceiveCount").and_then(Value::as_u64);
            match (target, max) {
                (Some(target), Some(max)) => Some((target, max as u32)),
                _ => {
                    return Err(TemplateError::Resource {
                        resource: id.to_string(),
                        message: "RedrivePolicy needs deadLetterTargetArn: !GetAtt <Queue>.Arn and maxReceiveCount".into(),
                    })
                }
            }
        }
    };
    Ok(QueueSpec {
        logical_id: id.to_string(),
        visibility_timeout: number("VisibilityTimeout"),
        retention_seconds: number("MessageRetentionPeriod"),
        redrive,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_project_template() {
        let t = Template::load_project().expect("template.yaml parses");
        let delivery = t.table("DeliveryTable").expect("DeliveryTable declared");
        assert_eq!(delivery.keys[0].attribute, "pk");
        assert_eq!(delivery.stream_view.as_deref(), Some("NEW_AND_OLD_IMAGES"));
        assert_eq!(delivery.ttl_attribute.as_deref(), Some("expires_at"));
        assert!(delivery.global_indexes.iter().any(|i| i.name == "due"));
        let changes = t.table("ChangesTable").expect("ChangesTable declared");
        assert_eq!(changes.stream_view.as_deref(), Some("NEW_IMAGE"));
        // The notification queue's retry budget is eight receives
        // (`docs/lifecycles.md#notification-delivery`).
        let notify = t
            .queue("NotificationQueue")
            .expect("NotificationQueue declared");
        assert_eq!(
            notify.redrive,
            Some(("NotificationDeadLetterQueue".to_string(), 8))
        );
        assert_eq!(
            t.function_env.get("DELIVERY_TABLE"),
            Some(&EnvValue::Ref("DeliveryTable".into()))
        );
        assert_eq!(
            t.parameters.get("AllowPrivateTargets").map(String::as_str),
            Some("false")
        );
        let deliver = t
            .function("DeliverFunction")
            .expect("DeliverFunction declared");
        assert_eq!(deliver.binary, "deliver");
        assert_eq!((deliver.memory_mb, deliver.timeout_seconds), (256, 60));
        let notify = t
            .function("NotifyFunction")
            .expect("NotifyFunction declared");
        assert_eq!(
            notify.environment.get("NOTIFICATION_CONFIGURATION_SET"),
            Some(&EnvValue::Ref("NotificationConfigurationSet".into()))
        );
        assert_eq!(t.functions.len(), 6);
    }

    #[test]
    fn conditions_with_the_defaults_choose_resources_and_environment() {
        let text = r#"
Parameters:
  Existing: { Type: String, Default: "" }
Conditions:
  Create: !Equals [!Ref Existing, ""]
  Reuse: !Not [!Condition Create]
Globals:
  Function:
    Environment:
      Variables:
        A: !If [Create, !Ref Made, !Ref Existing]
        B: !If [Reuse, !Ref Made, "fixed"]
Resources:
  Made:
    Type: AWS::SQS::Queue
    Condition: Create
  Skipped:
    Type: AWS::SQS::Queue
    Condition: Reuse
"#;
        let t = Template::parse(text).unwrap();
        assert!(t.queue("Made").is_some());
        assert!(t.queue("Skipped").is_none());
        assert_eq!(t.function_env["A"], EnvValue::Ref("Made".into()));
        assert_eq!(t.function_env["B"], EnvValue::Literal("fixed".into()));
    }

    #[test]
    fn refuses_a_redrive_policy_without_a_target() {
        let text = "Resources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties:\n      RedrivePolicy:\n        maxReceiveCount: 3\n";
        let err = Template::parse(text).unwrap_err();
        assert!(err.to_string().contains("RedrivePolicy"), "{err}");
    }
}

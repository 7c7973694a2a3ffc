//! Creates the tables, queues and KMS keys `template.yaml` declares on the emulator, under a name
//! prefix, and the environment the template would give a function in AWS.

use crate::template::{EnvValue, FunctionSpec, KeyElement, TableSpec, Template};
use anyhow::{anyhow, Context, Result};
use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;
use shared::config::Config;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub struct ProvisionedTable {
    pub name: String,
    pub stream_arn: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ProvisionedKey {
    /// What `!Ref` of the key gives: its id.
    pub id: String,
    pub arn: String,
}

#[derive(Debug, Clone)]
pub struct ProvisionedQueue {
    pub name: String,
    pub url: String,
    pub arn: String,
}

/// What was created for one prefix: physical names by logical id, and the function environment.
#[derive(Debug, Clone)]
pub struct Stack {
    pub prefix: String,
    pub tables: BTreeMap<String, ProvisionedTable>,
    pub queues: BTreeMap<String, ProvisionedQueue>,
    pub keys: BTreeMap<String, ProvisionedKey>,
    /// The template's parameters as this stack sets them: the defaults and the overrides.
    pub parameters: BTreeMap<String, String>,
    /// The variables of `Globals.Function.Environment`, with `!Ref`s resolved.
    pub env: BTreeMap<String, String>,
}

impl Stack {
    pub fn table(&self, logical_id: &str) -> &ProvisionedTable {
        self.tables
            .get(logical_id)
            .unwrap_or_else(|| panic!("template.yaml declares no table {logical_id}"))
    }

    pub fn key(&self, logical_id: &str) -> &ProvisionedKey {
        self.keys
            .get(logical_id)
            .unwrap_or_else(|| panic!("template.yaml declares no KMS key {logical_id}"))
    }

    pub fn queue(&self, logical_id: &str) -> &ProvisionedQueue {
        self.queues
            .get(logical_id)
            .unwrap_or_else(|| panic!("template.yaml declares no queue {logical_id}"))
    }

    /// What `!Ref id` gives in this stack: a table's name, a queue's URL, a KMS key's id or a
    /// parameter's value; `None` for a resource the harness does not provision.
    pub fn reference(&self, id: &str) -> Option<String> {
        if let Some(t) = self.tables.get(id) {
            Some(t.name.clone())
        } else if let Some(q) = self.queues.get(id) {
            Some(q.url.clone())
        } else if let Some(k) = self.keys.get(id) {
            Some(k.id.clone())
        } else {
            self.parameters.get(id).cloned()
        }
    }

    /// `variables` with every `!Ref` resolved, by this stack or else by `provided` (the values of
    /// resources the harness does not provision with the stack, by logical id).
    pub fn resolve(
        &self,
        variables: &BTreeMap<String, EnvValue>,
        provided: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>> {
        variables
            .iter()
            .map(|(var, value)| {
                let resolved = match value {
                    EnvValue::Literal(s) => s.clone(),
                    EnvValue::Ref(id) => self
                        .reference(id)
                        .or_else(|| provided.get(id).cloned())
                        .ok_or_else(|| {
                        anyhow!("{var}: !Ref {id} names nothing the harness provides")
                    })?,
                };
                Ok((var.clone(), resolved))
            })
            .collect()
    }

    /// The `!Ref`s of `function`'s own environment that this stack does not resolve.
    pub fn unprovisioned_refs<'a>(&self, function: &'a FunctionSpec) -> Vec<&'a str> {
        function
            .environment
            .values()
            .filter_map(|value| match value {
                EnvValue::Ref(id) if self.reference(id).is_none() => Some(id.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The environment variables the template gives `function`: the Globals ones with its own
    /// over them (`provided` as in [`Stack::resolve`]).
    pub fn function_env(
        &self,
        function: &FunctionSpec,
        provided: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>> {
        let mut env = self.env.clone();
        env.extend(self.resolve(&function.environment, provided)?);
        Ok(env)
    }

    /// The configuration a function deployed from the template would read.
    pub fn config(&self) -> Result<Config> {
        Config::from_map(&self.env).map_err(|e| anyhow!("{e}"))
    }
}

/// Creates every table and queue of `template` named `{prefix}-{LogicalId}`, and its KMS keys
/// (described so).
/// `overrides` replaces parameter defaults in the function environment (the demo allows private
/// webhook targets this way).
pub async fn provision(
    template: &Template,
    sdk: &SdkConfig,
    prefix: &str,
    overrides: &BTreeMap<String, String>,
) -> Result<Stack> {
    let dynamo = aws_sdk_dynamodb::Client::new(sdk);
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let kms = aws_sdk_kms::Client::new(sdk);
    let mut keys = BTreeMap::new();
    for id in &template.kms_keys {
        let description = format!("{prefix}-{id}");
        let created = kms
            .create_key()
            .description(&description)
            .send()
            .await
            .with_context(|| format!("creating KMS key {description}"))?;
        let meta = created
            .key_metadata
            .ok_or_else(|| anyhow!("no metadata for KMS key {description}"))?;
        let arn = meta
            .arn
            .ok_or_else(|| anyhow!("no ARN for KMS key {description}"))?;
        keys.insert(
            id.clone(),
            ProvisionedKey {
                id: meta.key_id,
                arn,
            },
        );
    }
    let mut tables = BTreeMap::new();
    for spec in &template.tables {
        let table = create_table(&dynamo, spec, prefix).await?;
        tables.insert(spec.logical_id.clone(), table);
    }
    let mut queues = BTreeMap::new();
    // Dead-letter queues first: a redrive policy names its target's ARN.
    let mut ordered: Vec<_> = template.queues.iter().collect();
    ordered.sort_by_key(|q| q.redrive.is_some());
    for spec in ordered {
        let name = format!("{prefix}-{}", spec.logical_id);
        let mut request = sqs.create_queue().queue_name(&name);
        if let Some(v) = spec.visibility_timeout {
            request = request.attributes(QueueAttributeName::VisibilityTimeout, v.to_string());
        }
        if let Some(v) = spec.retention_seconds {
            request = request.attributes(QueueAttributeName::MessageRetentionPeriod, v.to_string());
        }
        if let Some((target, max)) = &spec.redrive {
            let dlq: &ProvisionedQueue = queues.get(target).ok_or_else(|| {
                anyhow!(
                    "{} redrives to {target}, which is not a queue",
                    spec.logical_id
                )
            })?;
            let policy =
                serde_json::json!({"deadLetterTargetArn": dlq.arn, "maxReceiveCount": max});
            request = request.attributes(QueueAttributeName::RedrivePolicy, policy.to_string());
        }
        let url = request
            .send()
            .await
            .with_context(|| format!("creating queue {name}"))?
            .queue_url
            .ok_or_else(|| anyhow!("no URL for queue {name}"))?;
        let arn = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await?
            .attributes
            .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
            .ok_or_else(|| anyhow!("no ARN for queue {name}"))?;
        queues.insert(spec.logical_id.clone(), ProvisionedQueue { name, url, arn });
    }
    let mut parameters = template.parameters.clone();
    parameters.extend(overrides.clone());
    let mut stack = Stack {
        prefix: prefix.to_string(),
        tables,
        queues,
        keys,
        parameters,
        env: BTreeMap::new(),
    };
    stack.env = stack.resolve(&template.function_env, &BTreeMap::new())?;
    Ok(stack)
}

fn key_schema(keys: &[KeyElement]) -> Result<Vec<KeySchemaElement>> {
    keys.iter()
        .map(|k| {
            Ok(KeySchemaElement::builder()
                .attribute_name(&k.attribute)
                .key_type(KeyType::from(k.key_type.as_str()))
                .build()?)
        })
        .collect()
}

async fn create_table(
    dynamo: &aws_sdk_dynamodb::Client,
    spec: &TableSpec,
    prefix: &str,
) -> Result<ProvisionedTable> {
    let name = format!("{prefix}-{}", spec.logical_id);
    let mut request = dynamo
        .create_table()
        .table_name(&name)
        .billing_mode(BillingMode::PayPerRequest)
        .set_key_schema(Some(key_schema(&spec.keys)?));
    for (attribute, kind) in &spec.attributes {
        request = request.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(attribute)
                .attribute_type(ScalarAttributeType::from(kind.as_str()))
                .build()?,
        );
    }
    for index in &spec.global_indexes {
        let mut projection =
            Projection::builder().projection_type(ProjectionType::from(index.projection.as_str()));
        for a in &index.non_key_attributes {
            projection = projection.non_key_attributes(a);
        }
        request = request.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(&index.name)
                .set_key_schema(Some(key_schema(&index.keys)?))
                .projection(projection.build())
                .build()?,
        );
    }
    if let Some(view) = &spec.stream_view {
        request = request.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::from(view.as_str()))
                .build()?,
        );
    }
    let created = request
        .send()
        .await
        .with_context(|| format!("creating table {name}"))?;
    if let Some(attribute) = &spec.ttl_attribute {
        dynamo
            .update_time_to_live()
            .table_name(&name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(attribute)
                    .enabled(true)
                    .build()?,
            )
            .send()
            .await
            .with_context(|| format!("enabling TTL on {name}"))?;
    }
    Ok(ProvisionedTable {
        name,
        stream_arn: created.table_description.and_then(|d| d.latest_stream_arn),
    })
}

//! Drains a DynamoDB stream into a handler the way the Lambda event source mapping does: records in
//! order, in batches, as `aws_lambda_events` DynamoDB events, checkpointing after each batch and
//! retrying from the first record a handler reports in `batchItemFailures`.

use anyhow::{anyhow, Context, Result};
use aws_config::SdkConfig;
use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record, ShardIteratorType};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::future::Future;

/// What one drain delivered.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DrainReport {
    pub batches: usize,
    pub records: usize,
    /// Records a handler reported as failed (each retry counts again).
    pub failures: usize,
}

pub struct StreamTap {
    client: aws_sdk_dynamodbstreams::Client,
    stream_arn: String,
    region: String,
    /// The last sequence number each shard has been checkpointed at.
    checkpoints: BTreeMap<String, String>,
    pub batch_size: usize,
    /// The event source mapping's `FilterCriteria`: records it refuses never reach the handler
    /// and take no place in a batch (they are checkpointed past once the drain gets beyond them).
    pub filter: Option<fn(&aws_lambda_events::event::dynamodb::EventRecord) -> bool>,
    /// The mapping's `FilterCriteria` patterns as template.yaml states them, applied to the
    /// record's JSON as Lambda does (with `filter`, a record must pass both).
    pub patterns: Option<Vec<Value>>,
    /// Retries of a batch with failures before the drain gives up on it for now (the records are
    /// delivered again by the next drain, as the event source mapping would).
    pub max_retries_per_drain: usize,
}

/// Records a stream mapping hands one invocation, as `template.yaml`'s stream event sources set
/// it (`BatchSize`): ingest receives at most a hundred changes at once.
pub const STREAM_BATCH: usize = 100;

impl StreamTap {
    pub fn new(sdk: &SdkConfig, stream_arn: &str) -> Self {
        StreamTap {
            client: aws_sdk_dynamodbstreams::Client::new(sdk),
            stream_arn: stream_arn.to_string(),
            region: sdk
                .region()
                .map(|r| r.to_string())
                .unwrap_or_else(|| "us-east-1".into()),
            checkpoints: BTreeMap::new(),
            batch_size: STREAM_BATCH,
            filter: None,
            patterns: None,
            max_retries_per_drain: 2,
        }
    }

    /// Reads every record not yet checkpointed.
    async fn pending_records(&self) -> Result<Vec<(String, Record)>> {
        let description = self
            .client
            .describe_stream()
            .stream_arn(&self.stream_arn)
            .send()
            .await
            .context("describing the stream")?
            .stream_description
            .ok_or_else(|| anyhow!("no stream description"))?;
        let mut out = Vec::new();
        for shard in description.shards.unwrap_or_default() {
            let shard_id = shard.shard_id.unwrap_or_default();
            let mut request = self
                .client
                .get_shard_iterator()
                .stream_arn(&self.stream_arn)
                .shard_id(&shard_id);
            request = match self.checkpoints.get(&shard_id) {
                Some(seq) => request
                    .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                    .sequence_number(seq),
                None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            };
            let mut iterator = request.send().await?.shard_iterator;
            while let Some(it) = iterator {
                let page = self
                    .client
                    .get_records()
                    .shard_iterator(it)
                    .limit(1000)
                    .send()
                    .await?;
                let records = page.records.unwrap_or_default();
                if records.is_empty() {
                    break;
                }
                out.extend(records.into_iter().map(|r| (shard_id.clone(), r)));
                iterator = page.next_shard_iterator;
            }
        }
        Ok(out)
    }

    /// Delivers everything new to `handler`, batch by batch, until nothing is left (or a batch
    /// keeps failing `max_retries_per_drain` times).
    pub async fn drain<F, Fut>(&mut self, mut handler: F) -> Result<DrainReport>
    where
        F: FnMut(DynamoDbEvent) -> Fut,
        Fut: Future<Output = DynamoDbEventResponse>,
    {
        let mut report = DrainReport::default();
        let all = self.pending_records().await?;
        let records = if self.filter.is_none() && self.patterns.is_none() {
            all.clone()
        } else {
            let converted = self.event(&all)?.records;
            all.iter()
                .zip(&converted)
                .filter(|((_, raw), r)| self.admits(raw, r))
                .map(|(raw, _)| raw.clone())
                .collect()
        };
        let mut start = 0;
        let mut retries = 0;
        while start < records.len() {
            let batch = &records[start..(start + self.batch_size).min(records.len())];
            let event = self.event(batch)?;
            report.batches += 1;
            report.records += batch.len();
            let response = handler(event).await;
            let failed: HashSet<String> = response
                .batch_item_failures
                .iter()
                .filter_map(|f| f.item_identifier.clone())
                .collect();
            report.failures += failed.len();
            // Checkpoint up to (not including) the first failed record, as Lambda does.
            let first_failed = batch.iter().position(|(_, r)| {
                r.dynamodb
                    .as_ref()
                    .and_then(|d| d.sequence_number.as_ref())
                    .is_some_and(|s| failed.contains(s))
            });
            let done = first_failed.unwrap_or(batch.len());
            for (shard, record) in &batch[..done] {
                if let Some(seq) = record
                    .dynamodb
                    .as_ref()
                    .and_then(|d| d.sequence_number.clone())
                {
                    self.checkpoints.insert(shard.clone(), seq);
                }
            }
            start += done;
            if first_failed.is_some() {
                retries += 1;
                if retries > self.max_retries_per_drain {
                    break;
                }
            } else {
                retries = 0;
            }
        }
        if start == records.len() {
            // Everything handed over succeeded: past every record read, filtered ones included.
            for (shard, record) in &all {
                if let Some(seq) = record
                    .dynamodb
                    .as_ref()
                    .and_then(|d| d.sequence_number.clone())
                {
                    self.checkpoints.insert(shard.clone(), seq);
                }
            }
        }
        Ok(report)
    }

    /// Whether the mapping hands this record to the handler.
    fn admits(
        &self,
        raw: &Record,
        record: &aws_lambda_events::event::dynamodb::EventRecord,
    ) -> bool {
        self.filter.is_none_or(|keep| keep(record))
            && self
                .patterns
                .as_ref()
                .is_none_or(|p| crate::event_filter::passes(p, &self.record_json(raw)))
    }

    /// Every record not yet checkpointed, unfiltered and without checkpointing: its JSON as
    /// Lambda's filters see it, and what the handler's deserializer makes of it.
    pub async fn peek(
        &self,
    ) -> Result<Vec<(Value, aws_lambda_events::event::dynamodb::EventRecord)>> {
        let all = self.pending_records().await?;
        let converted = self.event(&all)?.records;
        Ok(all
            .iter()
            .map(|(_, raw)| self.record_json(raw))
            .zip(converted)
            .collect())
    }

    /// Builds the Lambda event for a batch through its JSON form, so the handler receives exactly
    /// what the `aws_lambda_events` deserializer makes of a real invocation.
    fn event(&self, batch: &[(String, Record)]) -> Result<DynamoDbEvent> {
        let records: Vec<Value> = batch.iter().map(|(_, r)| self.record_json(r)).collect();
        serde_json::from_value(json!({ "Records": records }))
            .context("building the DynamoDB stream event")
    }

    fn record_json(&self, record: &Record) -> Value {
        let d = record.dynamodb.as_ref();
        let image = |m: Option<&std::collections::HashMap<String, AttributeValue>>| {
            m.map(|m| Value::Object(item_json(m)))
        };
        let mut dynamodb = Map::new();
        if let Some(d) = d {
            if let Some(t) = d.approximate_creation_date_time {
                dynamodb.insert("ApproximateCreationDateTime".into(), json!(t.secs() as f64));
            }
            if let Some(k) = image(d.keys.as_ref()) {
                dynamodb.insert("Keys".into(), k);
            }
            if let Some(n) = image(d.new_image.as_ref()) {
                dynamodb.insert("NewImage".into(), n);
            }
            if let Some(o) = image(d.old_image.as_ref()) {
                dynamodb.insert("OldImage".into(), o);
            }
            dynamodb.insert("SequenceNumber".into(), json!(d.sequence_number));
            dynamodb.insert("SizeBytes".into(), json!(d.size_bytes.unwrap_or(0)));
            dynamodb.insert(
                "StreamViewType".into(),
                json!(d.stream_view_type.as_ref().map(|v| v.as_str())),
            );
        }
        json!({
            "eventID": record.event_id,
            "eventName": record.event_name.as_ref().map(|n| n.as_str()),
            "eventVersion": record.event_version.clone().unwrap_or_else(|| "1.1".into()),
            "eventSource": "aws:dynamodb",
            "awsRegion": self.region,
            "eventSourceARN": self.stream_arn,
            "dynamodb": dynamodb,
        })
    }
}

/// DynamoDB JSON (`{"S": "x"}`) for an item read from the streams API.
pub fn item_json(item: &std::collections::HashMap<String, AttributeValue>) -> Map<String, Value> {
    item.iter()
        .map(|(k, v)| (k.clone(), attribute_json(v)))
        .collect()
}

fn attribute_json(v: &AttributeValue) -> Value {
    use base64::Engine;
    let b64 = |b: &aws_smithy_types::Blob| {
        Value::String(base64::engine::general_purpose::STANDARD.encode(b.as_ref()))
    };
    match v {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(_) => json!({ "NULL": true }),
        AttributeValue::B(b) => json!({ "B": b64(b) }),
        AttributeValue::Ss(v) => json!({ "SS": v }),
        AttributeValue::Ns(v) => json!({ "NS": v }),
        AttributeValue::Bs(v) => json!({ "BS": v.iter().map(b64).collect::<Vec<_>>() }),
        AttributeValue::L(items) => {
            json!({ "L": items.iter().map(attribute_json).collect::<Vec<_>>() })
        }
        AttributeValue::M(m) => json!({ "M": item_json(m) }),
        _ => json!({ "NULL": true }),
    }
}

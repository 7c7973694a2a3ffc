//! What the dispatch function is invoked with, parsed in one pass: a delivery-stream batch's
//! records straight into their types, anything else as JSON (the sweep schedule's payload, or one
//! to refuse). Parsing every payload into a JSON tree first and converting the records from it
//! took a second pass over each record: 86,000 instructions a record against 50,000
//! (docs/history.md, "The dispatcher's event, parsed once").

use aws_lambda_events::event::dynamodb::{Event as DynamoDbEvent, EventRecord};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// The payload of one invocation of the dispatch function.
#[derive(Debug, Clone, PartialEq)]
pub enum Invocation {
    /// An object with `Records`: a delivery-stream batch (its other keys are ignored, as the
    /// stream event's own type ignores them).
    Stream(DynamoDbEvent),
    /// Any other JSON.
    Other(Value),
}

/// As the payload was (the harness hands an invocation over as the Lambda runtime does: as JSON).
impl Serialize for Invocation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Invocation::Stream(event) => event.serialize(serializer),
            Invocation::Other(payload) => payload.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Invocation {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(InvocationVisitor)
    }
}

struct InvocationVisitor;

impl<'de> Visitor<'de> for InvocationVisitor {
    type Value = Invocation;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON payload")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Invocation, A::Error> {
        let mut records: Option<Vec<EventRecord>> = None;
        let mut other = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "Records" {
                if records.is_some() {
                    return Err(de::Error::duplicate_field("Records"));
                }
                records = Some(map.next_value()?);
            } else {
                other.insert(key, map.next_value()?);
            }
        }
        Ok(match records {
            Some(records) => {
                let mut event = DynamoDbEvent::default();
                event.records = records;
                Invocation::Stream(event)
            }
            None => Invocation::Other(Value::Object(other)),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Invocation, A::Error> {
        let items = Vec::<Value>::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
        Ok(Invocation::Other(Value::Array(items)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Invocation, E> {
        Ok(Invocation::Other(Value::Null))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Invocation, E> {
        Ok(Invocation::Other(Value::Bool(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Invocation, E> {
        Ok(Invocation::Other(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Invocation, E> {
        Ok(Invocation::Other(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Invocation, E> {
        Ok(Invocation::Other(v.into()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Invocation, E> {
        Ok(Invocation::Other(Value::String(v.to_owned())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(text: &str) -> Invocation {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_payload_with_records_is_a_stream_batch_parsed_as_the_stream_event_is() {
        let text = include_str!("../../../../events/dispatch-delivery-stream.json");
        let Invocation::Stream(event) = parsed(text) else {
            panic!("not a stream batch")
        };
        let expected: DynamoDbEvent = serde_json::from_str(text).unwrap();
        assert_eq!(event, expected);
        assert_eq!(event.records.len(), 1);
        // From a JSON tree too (the tests' and the operator's way in), to the same records.
        let from_tree: Invocation =
            serde_json::from_value(serde_json::from_str(text).unwrap()).unwrap();
        assert_eq!(from_tree, Invocation::Stream(expected));
        // Written out, it parses back to the same invocation (the harness hands it over so).
        let written = serde_json::to_string(&from_tree).unwrap();
        assert_eq!(parsed(&written), from_tree);
        // Other keys beside the records are ignored, as the stream event's type ignores them.
        let Invocation::Stream(with_more) = parsed(r#"{"window": 1, "Records": []}"#) else {
            panic!("not a stream batch")
        };
        assert!(with_more.records.is_empty());
    }

    #[test]
    fn every_other_payload_is_kept_as_its_json() {
        for payload in [
            json!({"sweep": "due"}),
            json!({"sweep": "due", "extra": [1, 2.5, null, true]}),
            json!({}),
            json!([{"Records": []}]),
            json!(null),
            json!(true),
            json!(-3),
            json!(7),
            json!(1.5),
            json!("sweep"),
        ] {
            assert_eq!(
                parsed(&payload.to_string()),
                Invocation::Other(payload.clone())
            );
            assert_eq!(
                serde_json::from_value::<Invocation>(payload.clone()).unwrap(),
                Invocation::Other(payload)
            );
        }
    }

    #[test]
    fn malformed_records_or_records_twice_are_refused() {
        for text in [
            r#"{"Records": 1}"#,
            r#"{"Records": [{"dynamodb": 5}]}"#,
            r#"{"Records": [], "Records": []}"#,
        ] {
            assert!(serde_json::from_str::<Invocation>(text).is_err(), "{text}");
        }
    }
}

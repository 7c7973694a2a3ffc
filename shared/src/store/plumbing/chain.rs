//! Hash-chained histories: items that are written once and never replaced unseen. Each item of
//! a history (its partition) carries its number in the history ([`SEQ`]), the hash of the item
//! before it ([`PREVIOUS`]) and its own hash ([`HASH`]: SHA-256 over a canonical encoding of
//! every other attribute it has, those two included). The history's head ([`CHAIN_HEAD_SK`], in
//! the same partition) holds the last number and hash.
//!
//! An item module marks an item to chain ([`pending`]); [`super::write::send`] links it when it
//! sends the write: it reads the head, fills in the item's number and hashes ([`link`]) and puts
//! the new head in the same transaction, on the condition that the head is still the one it
//! read. When another writer moved the head first, it reads it again and retries (at most
//! [`TRIES`] times). So the entries of a history form one chain in the order they were written,
//! whatever the clocks of their writers said.
//!
//! [`verify`] walks a history in that order and names the first entry whose hash, link or number
//! does not hold: an entry replaced or removed outside the code (by a principal that may put
//! items on the prefix) is found there. Entries written before the chain existed carry no hash;
//! they are counted, not checked.

use super::expr::{n, s};
use super::item::{built, Item, StoreError};
pub use super::keys::CHAIN_HEAD_SK;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The item's number in its history, from 1.
pub const SEQ: &str = "chain_seq";
/// The hash of the item before it ([`GENESIS`] for the first).
pub(crate) const PREVIOUS: &str = "chain_prev";
/// The item's own hash (lowercase hex SHA-256).
pub const HASH: &str = "chain_hash";
/// The `kind` of a history's head.
pub(crate) const HEAD_KIND: &str = "chain_head";
/// What the first item of a history links to.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Tries of a chained write whose head keeps moving under it (concurrent writers of one
/// history) before it is a [`StoreError::Conflict`].
pub(crate) const TRIES: u32 = 10;
/// The [`HASH`] of an item not linked yet.
const PENDING: &str = "pending";
/// Prefixes the hashed encoding, so a change of the encoding changes every hash.
const DOMAIN: &[u8] = b"rhythm-chain-v1\0";

/// `item`, marked to be linked into its partition's history when it is sent.
pub fn pending(mut item: Item) -> Item {
    item.insert(HASH.into(), s(PENDING));
    item
}

/// A history's head as read: the last item's number and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub hash: String,
}

impl Head {
    /// The head an item holds (`None`: not a head, or not readable as one).
    pub fn of(item: &Item) -> Option<Head> {
        Some(Head {
            seq: item.get(SEQ)?.as_n().ok()?.parse().ok()?,
            hash: item.get(HASH)?.as_s().ok()?.clone(),
        })
    }
}

/// The partitions of the items `items` marks to be chained, in order of first appearance.
pub(crate) fn pending_histories(items: &[TransactWriteItem]) -> Vec<String> {
    let mut histories = Vec::new();
    for put in items.iter().filter_map(TransactWriteItem::put) {
        if is_pending(put.item()) {
            if let Some(pk) = put.item().get("pk").and_then(|v| v.as_s().ok()) {
                if !histories.contains(pk) {
                    histories.push(pk.clone());
                }
            }
        }
    }
    histories
}

/// Whether `put` is of an item marked to be chained.
pub(crate) fn is_pending_put(put: &Put) -> bool {
    is_pending(put.item())
}

fn is_pending(item: &Item) -> bool {
    item.get(HASH)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        == Some(PENDING)
}

/// Links the marked items of a transaction into their histories, given each history's head as
/// read (`None`: no head yet), and adds each history's new head, conditional on the head read.
pub fn link(
    mut items: Vec<TransactWriteItem>,
    heads: &BTreeMap<String, Option<Head>>,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let mut last: BTreeMap<String, Head> = BTreeMap::new();
    let mut table = None;
    for entry in items.iter_mut() {
        let Some(put) = entry.put().filter(|p| is_pending(p.item())) else {
            continue;
        };
        let mut item = put.item().clone();
        let pk = item
            .get("pk")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .ok_or_else(|| StoreError::Dynamo("a chained item without a pk".into()))?;
        let previous = last.get(&pk).cloned().unwrap_or_else(|| {
            heads.get(&pk).cloned().flatten().unwrap_or(Head {
                seq: 0,
                hash: GENESIS.into(),
            })
        });
        let seq = previous.seq + 1;
        item.insert(SEQ.into(), n(seq));
        item.insert(PREVIOUS.into(), s(&previous.hash));
        let hash = hash_of(&item);
        item.insert(HASH.into(), s(&hash));
        last.insert(pk, Head { seq, hash });
        table = Some(put.table_name().to_owned());
        *entry = TransactWriteItem::builder()
            .put(rebuilt(put, item)?)
            .build();
    }
    let table = table.unwrap_or_default();
    for (pk, head) in last {
        items.push(head_put(
            &table,
            &pk,
            &head,
            heads.get(&pk).and_then(Option::as_ref),
        )?);
    }
    Ok(items)
}

/// `put` with `item` in place of its item (its condition kept).
fn rebuilt(put: &Put, item: Item) -> Result<Put, StoreError> {
    built(
        Put::builder()
            .table_name(put.table_name())
            .set_item(Some(item))
            .set_condition_expression(put.condition_expression().map(str::to_string))
            .set_expression_attribute_names(put.expression_attribute_names().cloned())
            .set_expression_attribute_values(put.expression_attribute_values().cloned())
            .build(),
    )
}

/// The put of a history's new head: on the condition that it is still `read` (or, with none
/// read, that there is none).
fn head_put(
    table: &str,
    pk: &str,
    head: &Head,
    read: Option<&Head>,
) -> Result<TransactWriteItem, StoreError> {
    let mut put = Put::builder()
        .table_name(table)
        .item("pk", s(pk))
        .item("sk", s(CHAIN_HEAD_SK))
        .item("kind", s(HEAD_KIND))
        .item(SEQ, n(head.seq))
        .item(HASH, s(&head.hash));
    put = match read {
        None => put.condition_expression("attribute_not_exists(pk)"),
        Some(read) => put
            .condition_expression("#hash = :read")
            .expression_attribute_names("#hash", HASH)
            .expression_attribute_values(":read", s(&read.hash)),
    };
    Ok(TransactWriteItem::builder()
        .put(built(put.build())?)
        .build())
}

/// An item's hash: SHA-256 over the canonical encoding of every attribute but [`HASH`].
pub(crate) fn hash_of(item: &Item) -> String {
    let mut bytes = DOMAIN.to_vec();
    let hashed: BTreeMap<&String, &AttributeValue> =
        item.iter().filter(|(name, _)| *name != HASH).collect();
    encode_map(hashed, &mut bytes);
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A length-prefixed, type-tagged encoding; maps in name order, sets sorted: one byte string
/// per value, whatever order the attributes came in.
fn encode(value: &AttributeValue, out: &mut Vec<u8>) {
    let text = |tag: u8, text: &[u8], out: &mut Vec<u8>| {
        out.push(tag);
        out.extend((text.len() as u64).to_be_bytes());
        out.extend(text);
    };
    let sorted = |tag: u8, values: &[String], out: &mut Vec<u8>| {
        let mut values: Vec<&String> = values.iter().collect();
        values.sort();
        out.push(tag);
        out.extend((values.len() as u64).to_be_bytes());
        for v in values {
            text(b'S', v.as_bytes(), out);
        }
    };
    match value {
        AttributeValue::S(v) => text(b'S', v.as_bytes(), out),
        AttributeValue::N(v) => text(b'N', v.as_bytes(), out),
        AttributeValue::B(v) => text(b'B', v.as_ref(), out),
        AttributeValue::Bool(v) => out.extend([b'T', u8::from(*v)]),
        AttributeValue::Null(_) => out.push(b'0'),
        AttributeValue::M(m) => encode_map(m.iter().collect(), out),
        AttributeValue::L(l) => {
            out.push(b'L');
            out.extend((l.len() as u64).to_be_bytes());
            for v in l {
                encode(v, out);
            }
        }
        AttributeValue::Ss(v) => sorted(b's', v, out),
        AttributeValue::Ns(v) => sorted(b'n', v, out),
        AttributeValue::Bs(v) => {
            let v: Vec<String> = v.iter().map(|b| format!("{:?}", b.as_ref())).collect();
            sorted(b'b', &v, out)
        }
        _ => out.push(b'?'),
    }
}

fn encode_map(map: BTreeMap<&String, &AttributeValue>, out: &mut Vec<u8>) {
    out.push(b'M');
    out.extend((map.len() as u64).to_be_bytes());
    for (name, value) in map {
        out.extend((name.len() as u64).to_be_bytes());
        out.extend(name.as_bytes());
        encode(value, out);
    }
}

/// Where a history's chain does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break {
    /// The sort key of the entry where it breaks (`None`: at the head).
    pub sk: Option<String>,
    /// That entry's number, when it has one.
    pub seq: Option<u64>,
    pub reason: String,
}

/// What a walk of a history found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Entries on the chain.
    pub chained: u64,
    /// Entries written before the chain existed (no hash), before its first entry.
    pub unchained: u64,
    /// The head as stored.
    pub head: Option<Head>,
    /// The first link that does not hold; `None`: the history is intact.
    pub broken: Option<Break>,
}

/// Walks a history (`items`: every item of its partition, head included, in any order) in chain
/// order and finds its first broken link (see the module notes). `anchor`: a head recorded at an
/// earlier walk, which the entry of its number must still have (a chain rewritten from an entry
/// onward, every later hash recomputed, holds together but no longer has it).
pub fn verify(items: &[Item], anchor: Option<&Head>) -> Verdict {
    let sk = |item: &Item| item.get("sk").and_then(|v| v.as_s().ok()).cloned();
    let head_item = items
        .iter()
        .find(|i| sk(i).as_deref() == Some(CHAIN_HEAD_SK));
    let head = head_item.and_then(Head::of);
    let entries: Vec<&Item> = items
        .iter()
        .filter(|i| sk(i).as_deref() != Some(CHAIN_HEAD_SK))
        .collect();
    let (mut chained, unchained): (Vec<&Item>, Vec<&Item>) =
        entries.into_iter().partition(|i| i.contains_key(HASH));
    chained.sort_by_key(|i| (seq_of(i), sk(i)));
    let first_chained_sk = chained.iter().filter_map(|i| sk(i)).min();
    let (before, after): (Vec<&Item>, Vec<&Item>) = unchained
        .into_iter()
        .partition(|i| first_chained_sk.is_none() || sk(i) < first_chained_sk);
    let mut verdict = Verdict {
        chained: chained.len() as u64,
        unchained: before.len() as u64,
        head: head.clone(),
        broken: None,
    };
    let at = |item: &Item, reason: String| Break {
        sk: sk(item),
        seq: seq_of(item),
        reason,
    };
    if let Some(stray) = after.iter().min_by_key(|i| sk(i)) {
        verdict.broken = Some(at(
            stray,
            "an entry without a hash among the chained ones: written or replaced outside the code"
                .into(),
        ));
        return verdict;
    }
    let mut previous = Head {
        seq: 0,
        hash: GENESIS.into(),
    };
    for item in &chained {
        if let Some(reason) = link_fault(item, &previous) {
            verdict.broken = Some(at(item, reason));
            return verdict;
        }
        previous = Head {
            seq: previous.seq + 1,
            hash: hash_of(item),
        };
        if anchor.is_some_and(|a| a.seq == previous.seq && a.hash != previous.hash) {
            verdict.broken = Some(at(
                item,
                "its hash is not the one recorded for it: the chain was rewritten from here or before"
                    .into(),
            ));
            return verdict;
        }
    }
    verdict.broken =
        end_fault(head.as_ref(), head_item.is_some(), &previous, anchor).map(|reason| Break {
            sk: None,
            seq: None,
            reason,
        });
    verdict
}

/// Why a chain that holds up to `last` does not end there: the head (as read; `stored`: an item
/// is there) names another entry, or an anchor names a later one.
fn end_fault(
    head: Option<&Head>,
    stored: bool,
    last: &Head,
    anchor: Option<&Head>,
) -> Option<String> {
    if let Some(a) = anchor.filter(|a| a.seq > last.seq) {
        return Some(format!(
            "the chain ends at entry {} but entry {} was recorded: entries were removed",
            last.seq, a.seq
        ));
    }
    match head {
        None if !stored && last.seq == 0 => None,
        None => Some("the history's head is missing or unreadable".into()),
        Some(h) if h != last => Some(format!(
            "the head names entry {} but the chain ends at entry {}: entries were removed or the head replaced",
            h.seq, last.seq
        )),
        Some(_) => None,
    }
}

/// Why `item` is not the entry after `previous` (`None`: it is).
fn link_fault(item: &Item, previous: &Head) -> Option<String> {
    let expected = previous.seq + 1;
    match seq_of(item) {
        Some(seq) if seq == expected => {}
        Some(seq) if seq < expected => return Some(format!("a second entry numbered {seq}")),
        Some(seq) => {
            return Some(format!(
                "entries {expected} to {} are missing before this one",
                seq - 1
            ))
        }
        None => return Some("its number is missing or unreadable".into()),
    }
    let stored = item.get(HASH).and_then(|v| v.as_s().ok());
    if stored.map(String::as_str) != Some(hash_of(item).as_str()) {
        return Some("its contents do not match its hash: changed after it was written".into());
    }
    let links_to = item.get(PREVIOUS).and_then(|v| v.as_s().ok());
    if links_to != Some(&previous.hash) {
        return Some(format!(
            "it does not link to entry {}: an entry before it was replaced",
            previous.seq
        ));
    }
    None
}

fn seq_of(item: &Item) -> Option<u64> {
    item.get(SEQ)?.as_n().ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pk: &str, sk: &str, what: &str) -> TransactWriteItem {
        let mut item = Item::new();
        item.insert("pk".into(), s(pk));
        item.insert("sk".into(), s(sk));
        item.insert("what".into(), s(what));
        TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name("t")
                    .set_item(Some(pending(item)))
                    .condition_expression("attribute_not_exists(pk)")
                    .build()
                    .unwrap(),
            )
            .build()
    }

    fn put_items(items: &[TransactWriteItem]) -> Vec<Item> {
        items
            .iter()
            .map(|i| i.put().unwrap().item().clone())
            .collect()
    }

    /// A history of `n` entries written one at a time, head included.
    fn history(n: usize) -> Vec<Item> {
        let mut heads = BTreeMap::new();
        let mut stored: BTreeMap<String, Item> = BTreeMap::new();
        for i in 0..n {
            let linked = link(vec![entry("H", &format!("AT#{i:03}"), "x")], &heads).unwrap();
            for item in put_items(&linked) {
                let sk = item["sk"].as_s().unwrap().clone();
                if sk == CHAIN_HEAD_SK {
                    heads.insert("H".to_string(), Head::of(&item));
                }
                stored.insert(sk, item);
            }
        }
        stored.into_values().collect()
    }

    #[test]
    fn marked_items_are_numbered_linked_and_hashed_and_the_head_moves_on_the_one_read() {
        let read = Head {
            seq: 4,
            hash: "ab".repeat(32),
        };
        let heads = BTreeMap::from([("H".to_string(), Some(read.clone()))]);
        let linked = link(
            vec![entry("H", "AT#1", "first"), entry("H", "AT#2", "second")],
            &heads,
        )
        .unwrap();
        let items = put_items(&linked);
        assert_eq!(items.len(), 3, "two entries and one head");
        assert_eq!(items[0][SEQ], n(5));
        assert_eq!(items[0][PREVIOUS], s(&read.hash));
        assert_eq!(items[0][HASH], s(hash_of(&items[0])));
        assert_eq!(items[1][SEQ], n(6));
        assert_eq!(items[1][PREVIOUS], items[0][HASH]);
        let head = linked[2].put().unwrap();
        assert_eq!(head.item()["sk"], s(CHAIN_HEAD_SK));
        assert_eq!(
            Head::of(head.item()).unwrap().hash,
            *items[1][HASH].as_s().unwrap()
        );
        assert_eq!(head.condition_expression(), Some("#hash = :read"));
        assert_eq!(
            head.expression_attribute_values().unwrap()[":read"],
            s(&read.hash)
        );
        // The entries keep their own condition: never over another item.
        assert_eq!(
            linked[0].put().unwrap().condition_expression(),
            Some("attribute_not_exists(pk)")
        );
        // A first entry links to the genesis and creates the head.
        let first = link(vec![entry("G", "AT#1", "x")], &BTreeMap::new()).unwrap();
        assert_eq!(put_items(&first)[0][PREVIOUS], s(GENESIS));
        assert_eq!(
            first[1].put().unwrap().condition_expression(),
            Some("attribute_not_exists(pk)")
        );
        assert!(
            pending_histories(&first).is_empty(),
            "linked: nothing pending"
        );
    }

    #[test]
    fn the_hash_covers_every_attribute_in_any_order() {
        let mut a = Item::new();
        a.insert("x".into(), s("1"));
        a.insert(
            "m".into(),
            AttributeValue::M([("k".to_string(), n(1))].into()),
        );
        let mut b = a.clone();
        assert_eq!(hash_of(&a), hash_of(&b));
        b.insert("x".into(), s("2"));
        assert_ne!(hash_of(&a), hash_of(&b));
        // Moving text between attributes changes it too (the encoding is length-prefixed).
        let (mut c, mut d) = (Item::new(), Item::new());
        c.insert("ab".into(), s("c"));
        d.insert("a".into(), s("bc"));
        assert_ne!(hash_of(&c), hash_of(&d));
    }

    #[test]
    fn an_intact_history_verifies_and_each_tampering_is_found_where_it_is() {
        let items = history(5);
        let v = verify(&items, None);
        assert_eq!((v.chained, v.unchained, v.broken.clone()), (5, 0, None));
        assert_eq!(v.head.unwrap().seq, 5);

        let find = |items: &[Item], sk: &str| items.iter().position(|i| i["sk"] == s(sk)).unwrap();
        // A replaced entry: its hash no longer matches.
        let mut replaced = items.clone();
        let i = find(&replaced, "AT#002");
        replaced[i].insert("what".into(), s("y"));
        let broken = verify(&replaced, None).broken.unwrap();
        assert_eq!(
            (broken.sk.as_deref(), broken.seq),
            (Some("AT#002"), Some(3))
        );
        assert!(broken.reason.contains("do not match its hash"));
        // Replaced with its hash recomputed: the next entry no longer links to it.
        let rehashed = hash_of(&replaced[i]);
        replaced[i].insert(HASH.into(), s(rehashed));
        let broken = verify(&replaced, None).broken.unwrap();
        assert_eq!(broken.sk.as_deref(), Some("AT#003"));
        assert!(broken.reason.contains("does not link to entry 3"));
        // The chain rewritten from there on, the head too: it holds together, and only a head
        // recorded before tells.
        let recorded = verify(&items, None).head.unwrap();
        let mut rewritten = replaced.clone();
        rewritten.sort_by_key(|i| i["sk"].as_s().unwrap().clone());
        let from = find(&rewritten, "AT#002");
        let mut previous = rewritten[from][HASH].as_s().unwrap().clone();
        for item in rewritten.iter_mut().skip(from + 1) {
            if item["sk"] == s(CHAIN_HEAD_SK) {
                continue;
            }
            item.insert(PREVIOUS.into(), s(&previous));
            previous = hash_of(item);
            item.insert(HASH.into(), s(&previous));
        }
        let head = find(&rewritten, CHAIN_HEAD_SK);
        rewritten[head].insert(HASH.into(), s(&previous));
        assert_eq!(verify(&rewritten, None).broken, None);
        let broken = verify(&rewritten, Some(&recorded)).broken.unwrap();
        assert_eq!(broken.seq, Some(5));
        assert!(broken.reason.contains("rewritten"));
        assert_eq!(verify(&items, Some(&recorded)).broken, None);
        let later = Head { seq: 9, ..recorded };
        let broken = verify(&items, Some(&later)).broken.unwrap();
        assert!(broken.reason.contains("entry 9 was recorded"));
        // A removed entry, and a removed last entry.
        let mut removed = items.clone();
        removed.remove(find(&removed, "AT#001"));
        assert!(verify(&removed, None)
            .broken
            .unwrap()
            .reason
            .contains("entries 2 to 2 are missing"));
        let mut truncated = items.clone();
        truncated.remove(find(&truncated, "AT#004"));
        let broken = verify(&truncated, None).broken.unwrap();
        assert_eq!(broken.sk, None);
        assert!(broken.reason.contains("head names entry 5"));
        // An entry added without a hash among the chained ones.
        let mut stray = items.clone();
        let mut added = stray[0].clone();
        added.remove(HASH);
        added.insert("sk".into(), s("AT#002x"));
        stray.push(added);
        assert_eq!(
            verify(&stray, None).broken.unwrap().sk.as_deref(),
            Some("AT#002x")
        );
        // Entries from before the chain are counted, not checked.
        let mut older = items.clone();
        let mut old = Item::new();
        old.insert("pk".into(), s("H"));
        old.insert("sk".into(), s("AT#"));
        older.push(old);
        let v = verify(&older, None);
        assert_eq!((v.chained, v.unchained, v.broken), (5, 1, None));
    }
}

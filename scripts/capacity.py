"""DynamoDB capacity accounting for the local emulator.

moto answers `ReturnConsumedCapacity` with constants (1 unit per write, 0.5 per read, no index
writes), so cost figures measured against it would be wrong exactly where they matter: items
larger than a kilobyte, transactions, and the writes every global secondary index adds. This
middleware computes what DynamoDB would report, from the items before and after each request, by
the rules AWS documents for on-demand capacity:

* item size: UTF-8 bytes of each attribute name plus its value (strings: UTF-8 bytes; numbers:
  one byte per two significant digits plus one; binary: raw bytes; booleans and null: one byte;
  lists and maps: three bytes plus one per element plus the elements; sets: their elements);
* a write costs one unit per started kilobyte of the larger of the item before and after; a
  transactional write costs two (the index writes it causes are charged as standard writes: they
  are applied after the transaction commits); a delete costs the size of the deleted item;
* a write also costs each global secondary index it changes: one unit per started kilobyte of the
  index entry when an entry is added, removed or its projected attributes change, two writes
  (delete and put) when the entry's index key changes, nothing when the index does not see the
  change (keys-only and include projections skip updates of attributes they do not hold);
* a read costs one unit per started 4 KB (half for eventually consistent reads, twice for
  transactional ones), of each item for GetItem and BatchGetItem, of the items a Query or Scan
  evaluated for those; reading a missing item still costs the minimum.

Only requests that ask for it (`ReturnConsumedCapacity` TOTAL or INDEXES) are accounted, so the
tests, which do not ask, run as before. Failed conditional writes return an error, which carries
no capacity in DynamoDB either; the benchmark counts them by their error code.
"""

import base64
import io
import json
import math
import zlib
from decimal import Decimal

from moto.dynamodb.models import dynamodb_backends

WRITE_OPS = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
READ_OPS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
KB = 1024
READ_BLOCK = 4 * KB


# --- sizes ---------------------------------------------------------------------------------------


def number_size(text: str) -> int:
    digits = text.lstrip("+-").lower().split("e")[0].replace(".", "").strip("0")
    return (max(len(digits), 1) + 1) // 2 + 1


def value_size(value: dict) -> int:
    (kind, v), = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return number_size(v)
    if kind == "B":
        return len(base64.b64decode(v))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in v)
    if kind == "NS":
        return sum(number_size(n) for n in v)
    if kind == "BS":
        return sum(len(base64.b64decode(b)) for b in v)
    if kind == "L":
        return 3 + sum(1 + value_size(e) for e in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(e) for k, e in v.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def blocks(size: int, block: int) -> int:
    """Started blocks, at least one."""
    return max(1, math.ceil(size / block))


# --- tables and items ----------------------------------------------------------------------------


def find_table(name: str):
    for regions in dynamodb_backends.values():
        for backend in regions.values():
            table = backend.tables.get(name)
            if table is not None:
                return backend, table
    return None, None


def key_of(table, item: dict) -> dict:
    names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
    return {n: item[n] for n in names if n in item}


def stored(table_name: str, key: dict) -> dict | None:
    backend, table = find_table(table_name)
    if table is None:
        return None
    try:
        item = backend.get_item(table_name, key)
    except Exception:  # a malformed key: the request itself will fail
        return None
    return item.to_json()["Attributes"] if item else None


def index_entry(table, index, item: dict | None) -> dict | None:
    """The item as the index holds it, or None when the item lacks the index's key (sparse)."""
    if not item or any(n not in item for n in index.schema_key_attrs):
        return None
    projection = (index.projection or {}).get("ProjectionType", "ALL")
    if projection == "ALL":
        return dict(item)
    names = set(index.schema_key_attrs) | set(key_of(table, item))
    if projection == "INCLUDE":
        names |= set(index.projection.get("NonKeyAttributes", []))
    return {n: v for n, v in item.items() if n in names}


# --- units ---------------------------------------------------------------------------------------


class Usage:
    """Units per table: the table's own and each index's."""

    def __init__(self, kind: str):
        self.kind = kind  # "Read" or "Write"
        self.tables: dict[str, dict] = {}

    def add(self, table: str, units: float, index: str | None = None) -> None:
        entry = self.tables.setdefault(table, {"table": 0.0, "indexes": {}})
        if index is None:
            entry["table"] += units
        else:
            entry["indexes"][index] = entry["indexes"].get(index, 0.0) + units

    def consumed(self, table: str, mode: str) -> dict:
        entry = self.tables.get(table, {"table": 0.0, "indexes": {}})
        total = entry["table"] + sum(entry["indexes"].values())
        out = {"TableName": table, "CapacityUnits": total, f"{self.kind}CapacityUnits": total}
        if mode == "INDEXES":
            out["Table"] = {"CapacityUnits": entry["table"], f"{self.kind}CapacityUnits": entry["table"]}
            if entry["indexes"]:
                out["GlobalSecondaryIndexes"] = {
                    name: {"CapacityUnits": u, f"{self.kind}CapacityUnits": u}
                    for name, u in entry["indexes"].items()
                }
        return out


def charge_write(usage: Usage, table_name: str, before: dict | None, after: dict | None, factor: int) -> None:
    _, table = find_table(table_name)
    if table is None:
        return
    usage.add(table_name, factor * blocks(max(item_size(before), item_size(after)), KB))
    for index in table.global_indexes:
        old, new = index_entry(table, index, before), index_entry(table, index, after)
        if old is None and new is None:
            continue
        if old is not None and new is not None:
            same_key = all(old[n] == new[n] for n in index.schema_key_attrs)
            if same_key and old == new:
                continue
            units = blocks(max(item_size(old), item_size(new)), KB) if same_key else blocks(item_size(old), KB) + blocks(item_size(new), KB)
        else:
            units = blocks(item_size(old or new), KB)
        usage.add(table_name, units, index.name)


def write_targets(op: str, body: dict) -> list[tuple[str, dict, int]]:
    """(table, key, factor) of every item the write request touches."""

    def key(table_name: str, request: dict) -> dict:
        if "Key" in request:
            return request["Key"]
        _, table = find_table(table_name)
        return key_of(table, request.get("Item", {})) if table is not None else {}

    if op in ("PutItem", "UpdateItem", "DeleteItem"):
        return [(body["TableName"], key(body["TableName"], body), 1)]
    if op == "BatchWriteItem":
        out = []
        for table_name, requests in body.get("RequestItems", {}).items():
            for r in requests:
                inner = r.get("PutRequest") or r.get("DeleteRequest") or {}
                out.append((table_name, key(table_name, inner), 1))
        return out
    if op == "TransactWriteItems":
        out = []
        for action in body.get("TransactItems", []):
            (_, inner), = action.items()
            out.append((inner["TableName"], key(inner["TableName"], inner), 2))
        return out
    return []


def charge_read(usage: Usage, op: str, body: dict, response: dict) -> None:
    if op == "GetItem":
        factor = 1.0 if body.get("ConsistentRead") else 0.5
        usage.add(body["TableName"], factor * blocks(item_size(stored(body["TableName"], body["Key"])), READ_BLOCK))
    elif op in ("BatchGetItem", "TransactGetItems"):
        if op == "BatchGetItem":
            gets = [
                (t, k, 1.0 if spec.get("ConsistentRead") else 0.5)
                for t, spec in body.get("RequestItems", {}).items()
                for k in spec.get("Keys", [])
            ]
        else:
            gets = [(g["Get"]["TableName"], g["Get"]["Key"], 2.0) for g in body.get("TransactItems", [])]
        for table_name, k, factor in gets:
            usage.add(table_name, factor * blocks(item_size(stored(table_name, k)), READ_BLOCK))
    elif op in ("Query", "Scan"):
        table_name, index_name = body["TableName"], body.get("IndexName")
        _, table = find_table(table_name)
        if table is None:
            return
        index = next((i for i in table.global_indexes if i.name == index_name), None)
        total = 0
        for returned in response.get("Items", []):
            full = stored(table_name, key_of(table, returned)) if len(key_of(table, returned)) == len(table.schema) else None
            if full is not None and index is not None:
                full = index_entry(table, index, full)
            total += item_size(full if full is not None else returned)
        # Items the filter dropped were read too: count them at the returned items' average size.
        count, scanned = response.get("Count", 0), response.get("ScannedCount", 0)
        if scanned > count and count:
            total = total * scanned / count
        consistent = body.get("ConsistentRead") and index is None
        usage.add(table_name, (1.0 if consistent else 0.5) * blocks(int(total), READ_BLOCK), index_name)


# --- the middleware ------------------------------------------------------------------------------


class ConsumedCapacity:
    """WSGI middleware that replaces moto's constant ConsumedCapacity with computed units.

    It must run inside the emulator's request lock: it reads items before and after the request.
    """

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        op = target.split(".", 1)[1] if target.startswith("DynamoDB_") else ""
        if op not in WRITE_OPS and op not in READ_OPS:
            return self.app(environ, start_response)
        raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(raw)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self.app(environ, start_response)
        mode = body.get("ReturnConsumedCapacity", "NONE")
        if mode not in ("TOTAL", "INDEXES"):
            return self.app(environ, start_response)

        targets = write_targets(op, body) if op in WRITE_OPS else []
        before = [stored(t, k) for t, k, _ in targets]
        captured = {}

        def capture(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers
            return lambda data: None

        chunks = b"".join(self.app(environ, capture))
        status, headers = captured["status"], captured["headers"]
        if not status.startswith("200"):
            start_response(status, headers)
            return [chunks]
        response = json.loads(chunks or b"{}", parse_float=Decimal)

        if op in WRITE_OPS:
            usage = Usage("Write")
            for (table_name, k, factor), old in zip(targets, before):
                charge_write(usage, table_name, old, stored(table_name, k), factor)
        else:
            usage = Usage("Read")
            charge_read(usage, op, body, response)

        if op in ("PutItem", "UpdateItem", "DeleteItem", "GetItem", "Query", "Scan"):
            response["ConsumedCapacity"] = usage.consumed(body["TableName"], mode)
        else:
            response["ConsumedCapacity"] = [usage.consumed(t, mode) for t in usage.tables]

        out = json.dumps(response, default=lambda d: float(d) if d % 1 else int(d)).encode()
        # The body changed: so do its length and the checksum DynamoDB clients verify.
        headers = [(k, v) for k, v in headers if k.lower() not in ("content-length", "x-amz-crc32")]
        headers += [("Content-Length", str(len(out))), ("x-amz-crc32", str(zlib.crc32(out)))]
        start_response(status, headers)
        return [out]

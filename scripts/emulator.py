"""The local AWS emulator: moto's server application behind one lock.

moto server answers requests on parallel threads, and its item writes are read-modify-write
sequences without locking: two concurrent conditional updates of one item can both succeed, and a
transaction can write back a stale copy of an item another request just changed. DynamoDB applies
each item write atomically, and this project's correctness (conditional claims, idempotency keys,
counters) rests on that. Serialising requests makes every request atomic, which is the property the
tests need; the emulator's speed is not what they measure.

It also answers `ReturnConsumedCapacity` with the units DynamoDB would charge (see capacity.py),
which the benchmark's cost figures are read from.

It is served by waitress with HTTP/1.1 keep-alive, as AWS endpoints serve the SDK: werkzeug's
development server (moto's own) answers every request with `Connection: close`, so each SDK call
paid for a new TCP connection and a new server thread, which is neither what AWS costs a client
nor fair to the benchmark's CPU figures. The SDK's headers have no underscores, so moto's
werkzeug request handler (which keeps underscored S3 metadata headers) is not needed here.

It scales to tables of many thousand items (a chaos run of thousands of changes on one stack):
moto 5.2.5 answers every Query by sorting the whole table and filtering it, and backs every
TransactWriteItems up by deep-copying each table it names. Two patches below (tied to the pinned
moto version) replace those with what DynamoDB's own costs look like: a Query reads only its
partition (a table or local index query the table's own partition, a global index query a hash
index kept up to date on every write), and a transaction's rollback is an undo log of the items it
names and of its tables' stream lengths. Everything else about a Query (sorting, paging, range
conditions, filters, projections) and a transaction (conditions, cancellation reasons) is still
moto's own code; the integration suite's `emulator` module checks the answers and the atomicity.

Usage: python scripts/emulator.py HOST PORT
"""

import base64
import calendar
import copy
import datetime
import sys
import threading

import moto
import moto.dynamodb.models as dynamodb_models
from moto import settings
from moto.core.responses import ActionResult
from moto.core.utils import unix_time
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from waitress import serve

from capacity import ConsumedCapacity

# The patches below reach into moto's internals: another moto needs them re-checked.
PATCHED_MOTO = "5.2.5"


# --- Query: only the partition asked for ---------------------------------------------------------


def stored_item(table: Table, hash_value, range_value):
    """The item under a primary key, without the side effect of `table.items[...]` (a defaultdict)."""
    found = table.items.get(hash_value)
    if found is None or table.range_key_attr is None:
        return found
    return found.get(range_value)


def index_hash_attrs(index) -> tuple[str, ...]:
    return tuple(k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH")


def index_hash_of(item, attrs: tuple[str, ...]):
    """The item's hash value tuple in an index, or None when the index does not hold it (sparse)."""
    values = tuple(item.attrs.get(a) for a in attrs) if item is not None else (None,)
    return None if any(v is None for v in values) else values


class HashIndex:
    """Per table: for each global index queried so far, hash value tuple -> primary keys."""

    def __init__(self):
        # index name -> (hash attribute names, {hash tuple: {primary key: None}})
        self.buckets: dict[str, tuple[tuple[str, ...], dict]] = {}
        # primary key -> {index name: hash tuple}, to find an item's old entries
        self.entries: dict[tuple, dict[str, tuple]] = {}

    def bucket(self, table: Table, index) -> dict:
        attrs = index_hash_attrs(index)
        known = self.buckets.get(index.name)
        if known is None or known[0] != attrs:
            # Built once from the whole table (the index was created or never queried before).
            buckets: dict = {}
            self.buckets[index.name] = (attrs, buckets)
            for item in table.all_items():
                self.add(index.name, attrs, buckets, item)
            known = self.buckets[index.name]
        return known[1]

    def add(self, name, attrs, buckets, item) -> None:
        value = index_hash_of(item, attrs)
        if value is None:
            return
        key = (item.hash_key, item.range_key)
        buckets.setdefault(value, {})[key] = None
        self.entries.setdefault(key, {})[name] = value

    def reindex(self, table: Table, hash_value, range_value) -> None:
        key = (hash_value, range_value)
        for name, value in self.entries.pop(key, {}).items():
            bucket = self.buckets.get(name, (None, {}))[1].get(value)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self.buckets[name][1][value]
        item = stored_item(table, hash_value, range_value)
        for name, (attrs, buckets) in self.buckets.items():
            self.add(name, attrs, buckets, item)


def hash_index(table: Table) -> HashIndex:
    index = table.__dict__.get("_emulator_hash_index")
    if index is None:
        index = table._emulator_hash_index = HashIndex()
    return index


def reindex(table: Table, hash_value, range_value) -> None:
    index = table.__dict__.get("_emulator_hash_index")
    if index is not None:
        index.reindex(table, hash_value, range_value)


def query_candidates(table: Table, hash_key, index_name, hash_key_conditions):
    """The items a Query can match (a superset), or None to scan them all.

    Their order does not matter: moto sorts them by the index's and then the table's keys."""
    if index_name is None:
        if hash_key is None:
            return None
        found = table.items.get(hash_key)
        if found is None:
            return []
        return list(found.values()) if table.range_key_attr else [found]
    index = next((i for i in table.all_indexes() if i.name == index_name), None)
    if index is None:
        return None  # moto's own error
    attrs = index_hash_attrs(index)
    wanted = dict(hash_key_conditions or [])
    if not attrs or set(wanted) != set(attrs):
        return None
    value = tuple(wanted[a] for a in attrs)
    if attrs == (table.hash_key_attr,):
        # A local index (or a global one on the table's hash key): the table's partition.
        return query_candidates(table, value[0], None, None)
    keys = hash_index(table).bucket(table, index).get(value, {})
    return [stored_item(table, h, r) for h, r in keys]


moto_query = Table.query


def query(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
          scan_index_forward, projection_expressions, index_name=None, *args,
          hash_key_conditions=None, **kwargs):
    candidates = query_candidates(self, hash_key, index_name, hash_key_conditions)
    if candidates is not None:
        # moto's query starts from `self.all_items()`: hand it the candidates instead.
        self.all_items = lambda: candidates
    try:
        return moto_query(self, hash_key, range_comparison, range_objs, limit,
                          exclusive_start_key, scan_index_forward, projection_expressions,
                          index_name, *args, hash_key_conditions=hash_key_conditions, **kwargs)
    finally:
        self.__dict__.pop("all_items", None)


def key_values(table: Table, key: dict):
    hash_value = DynamoType(key[table.hash_key_attr])
    range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
    return hash_value, range_value


moto_put_item = Table.put_item
moto_delete_item = Table.delete_item
moto_update_item = DynamoDBBackend.update_item


def put_item(self, item_attrs, *args, **kwargs):
    try:
        return moto_put_item(self, item_attrs, *args, **kwargs)
    finally:
        if self.hash_key_attr in item_attrs and (
            self.range_key_attr is None or self.range_key_attr in item_attrs
        ):
            reindex(self, *key_values(self, item_attrs))


def delete_item(self, hash_key, range_key):
    try:
        return moto_delete_item(self, hash_key, range_key)
    finally:
        reindex(self, hash_key, range_key)


def update_item(self, table_name, key, *args, **kwargs):
    # moto updates the stored item in place.
    try:
        return moto_update_item(self, table_name, key, *args, **kwargs)
    finally:
        table = self.tables.get(table_name)
        if table is not None and table.hash_key_attr in key:
            reindex(table, *key_values(table, key))


# --- TransactWriteItems: an undo log instead of copies of whole tables ---------------------------


class NoTableCopies:
    """The `copy` module as moto's backend sees it: a table "copy" is the table itself.

    moto's transact_write_items backs up each table it names with copy.deepcopy and puts the
    copies back on failure; with this, its backup and restore are no-ops and the undo log in
    `transact_write_items` below restores the items. Every other copy is a real one."""

    @staticmethod
    def deepcopy(x, memo=None):
        return x if isinstance(x, Table) else copy.deepcopy(x, memo)

    copy = staticmethod(copy.copy)


moto_transact_write_items = DynamoDBBackend.transact_write_items


def transact_write_items(self, transact_items):
    before: dict = {}  # (table name, hash, range) -> (table, copy of the item or None)
    streams: dict = {}  # id(shard) -> (shard, its length before)
    for entry in transact_items:
        for op in entry.values():
            table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
            if table is None:
                continue
            try:
                hash_value, range_value = key_values(table, op.get("Item") or op.get("Key"))
            except (KeyError, TypeError):
                continue  # moto refuses the request before writing this one
            slot = (table.name, hash_value, range_value)
            if slot not in before:
                current = stored_item(table, hash_value, range_value)
                before[slot] = (table, copy.deepcopy(current))
            shard = table.stream_shard
            if shard is not None:
                streams.setdefault(id(shard), (shard, len(shard.items)))
    try:
        return moto_transact_write_items(self, transact_items)
    except BaseException:
        for (_, hash_value, range_value), (table, item) in before.items():
            if table.range_key_attr is None:
                if item is None:
                    table.items.pop(hash_value, None)
                else:
                    table.items[hash_value] = item
            elif item is None:
                table.items.get(hash_value, {}).pop(range_value, None)
            else:
                table.items[hash_value][range_value] = item
            reindex(table, hash_value, range_value)
        for shard, length in streams.values():
            del shard.items[length:]
        raise


# --- Responses: items as they are ---------------------------------------------------------------

# Operations whose results moto builds already in their wire form (items as DynamoDB JSON).
PLAIN_RESULTS = {
    ("dynamodb", op)
    for op in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
               "BatchWriteItem", "TransactGetItems")
} | {("dynamodbstreams", "GetRecords")}


def wire(value):
    """A result as the JSON serializer would write it: no None members, blobs in base64, the
    stream records' timestamps (the only timestamps of these results) to the millisecond."""
    if isinstance(value, dict):
        return {
            k: (timestamp(v) if k == "ApproximateCreationDateTime" else wire(v))
            for k, v in value.items()
            if v is not None
        }
    if isinstance(value, (list, tuple)):
        return [wire(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime.datetime):
        return unix_time(value)
    return value


def timestamp(value):
    """Epoch seconds truncated to milliseconds, as moto's serializer writes them."""
    if isinstance(value, (int, float)):
        value = datetime.datetime.fromtimestamp(value, tz=datetime.timezone.utc)
    return calendar.timegm(value.timetuple()) + (value.microsecond // 1000) / 1000.0


moto_execute_result = ActionResult.execute_result


def execute_result(self, context):
    """moto's serializer walks the service model for every attribute of every item, which cost
    most of a large run's emulator time (GetRecords and Query answers); these results are already
    what goes on the wire, so they are written as they are, with the serializer's own headers."""
    key = (context.service_model.service_name, context.operation_model.name)
    if key not in PLAIN_RESULTS or not isinstance(self.result, dict):
        return moto_execute_result(self, context)
    serializer = context.serializer_class(
        operation_model=context.operation_model, pretty_print=settings.PRETTIFY_RESPONSES
    )
    shape = context.operation_model.output_shape
    # Only the output's own members, as the serializer writes (moto adds a few of its own).
    result = {k: v for k, v in self.result.items() if k in shape.members}
    response = serializer._serialized_result_to_response(
        serializer._create_default_response(), result, shape, wire(result)
    )
    return response["status_code"], response["headers"], response["body"]


def patch_moto() -> None:
    assert moto.__version__ == PATCHED_MOTO, f"emulator.py patches moto {PATCHED_MOTO}"
    Table.query = query
    Table.put_item = put_item
    Table.delete_item = delete_item
    DynamoDBBackend.update_item = update_item
    DynamoDBBackend.transact_write_items = transact_write_items
    dynamodb_models.copy = NoTableCopies
    ActionResult.execute_result = execute_result


class Serialised:
    """WSGI middleware: one request inside the application at a time (the body is read inside)."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            # Materialise the response inside the lock: moto does its work while it is iterated.
            return list(self.app(environ, start_response))


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    patch_moto()
    app = DomainDispatcherApplication(create_backend_app)
    serve(
        Serialised(ConsumedCapacity(app)),
        host=host,
        port=port,
        # Requests run one at a time (Serialised); the threads only wait for the lock.
        threads=8,
        # Every test's clients keep their connections open: allow many, and keep idle ones
        # for as long as a test suite runs (a client that finds one closed reconnects).
        connection_limit=2000,
        channel_timeout=3600,
        # A large transaction or batch answer in one piece.
        outbuf_overflow=64 * 1024 * 1024,
        ident="moto",
        _quiet=True,
    )


if __name__ == "__main__":
    main()

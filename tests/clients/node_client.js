// node-postgres against `dpsql serve` (tests/test_clients_node.py): prints one JSON object of what it saw.
// Arguments: the port, "tls" or "plain", the large query and its number of rows, a statement that runs until cancelled.
const { Client, Query } = require('pg');

async function main([port, tls, large, slow]) {
  const seen = {};
  const config = { host: '127.0.0.1', port: Number(port), user: 'alice', password: 'alice-pw', database: 'census',
    ssl: tls === 'tls' ? { rejectUnauthorized: false } : false };  // the test certificate is self-signed
  const client = new Client(config);
  await client.connect();
  seen.tls = client.connection.stream.encrypted === true;
  const rows = async (text, values) => (await client.query(text, values)).rows;
  // node-postgres sends every parameter untyped, as text: the server types it by its context
  seen.untyped = await rows('SELECT sex, COUNT(*) AS n FROM people WHERE age > $1 GROUP BY sex ORDER BY sex', [25]);
  seen.cast = (await rows('SELECT COUNT(*) AS n FROM people WHERE age > $1::int', ['25']))[0].n;
  seen.category = (await rows('SELECT COUNT(*) AS n FROM people WHERE sex = $1', ['F']))[0].n;
  seen.named = (await client.query('SELECT COUNT(*) FROM people')).fields.map((f) => f.name);
  seen.values = (await client.query({ text: 'SELECT $1::float8 * 2 AS x, $2::date + 1 AS d, $3::bool AS b',
    values: [1.5, '2024-01-31', true], rowMode: 'array' })).rows[0].map(String);
  // an error between other statements (queued at once, answered in order)
  const queued = await Promise.allSettled([
    client.query('SELECT 1 AS one'), client.query('SELECT nosuch FROM people WHERE age > $1', [1]),
    client.query('SELECT 2 AS two')]);
  seen.queued = queued.map((r) => (r.status === 'fulfilled' ? r.value.rows[0] : { error: r.reason.message }));
  seen.simple = (await client.query('SELECT 1 AS a; SELECT 2 AS b')).map((r) => r.rows);  // the simple protocol
  await client.query('SET dpsql.stderr = on');
  seen.stderr = await rows('SELECT sex, COUNT(*) AS n FROM people WHERE age > $1 GROUP BY sex ORDER BY sex', [25]);
  seen.budget = await rows('SHOW dpsql.budget');
  const big = await rows(large);
  seen.large = { count: big.length, first: big[0], last: big[big.length - 1] };
  const running = client.query(new Query(slow));  // cancelled from a connection of its own, as pg does it
  const stopped = new Promise((resolve) => { running.on('error', (e) => resolve(e.code)); running.on('end', () => resolve('ran')); });
  setTimeout(() => new Client(config).cancel(client, running), 500);
  seen.cancel = await stopped;
  seen.after_cancel = (await rows('SELECT 3 AS three'))[0].three;
  await client.end();
  seen.closed = true;
  console.log(JSON.stringify(seen));
}

main(process.argv.slice(2)).catch((e) => { console.error(e.message); process.exit(1); });

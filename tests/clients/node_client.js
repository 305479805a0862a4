// node-postgres against `dpsql serve` (tests/test_clients_node.py): prints one JSON object of what it saw.
const { Client } = require('pg');

async function main(port) {
  const seen = {};
  const client = new Client({ host: '127.0.0.1', port, user: 'alice', password: 'alice-pw', database: 'census' });
  await client.connect();
  const rows = async (text, values) => (await client.query(text, values)).rows;
  // node-postgres sends every parameter untyped, as text: the server types it by its context
  seen.untyped = await rows('SELECT sex, COUNT(*) AS n FROM people WHERE age > $1 GROUP BY sex ORDER BY sex', [25]);
  seen.cast = (await rows('SELECT COUNT(*) AS n FROM people WHERE age > $1::int', ['25']))[0].n;
  seen.category = (await rows('SELECT COUNT(*) AS n FROM people WHERE sex = $1', ['F']))[0].n;
  // an error between other statements (queued at once, answered in order)
  const queued = await Promise.allSettled([
    client.query('SELECT 1 AS one'), client.query('SELECT nosuch FROM people WHERE age > $1', [1]),
    client.query('SELECT 2 AS two')]);
  seen.queued = queued.map((r) => (r.status === 'fulfilled' ? r.value.rows[0] : { error: r.reason.message }));
  seen.simple = (await client.query('SELECT 1 AS a; SELECT 2 AS b')).map((r) => r.rows);  // the simple protocol
  await client.query('SET dpsql.stderr = on');
  seen.stderr = await rows('SELECT sex, COUNT(*) AS n FROM people WHERE age > $1 GROUP BY sex ORDER BY sex', [25]);
  seen.budget = await rows('SHOW dpsql.budget');
  await client.end();
  seen.closed = true;
  console.log(JSON.stringify(seen));
}

main(Number(process.argv[2])).catch((e) => { console.error(e.message); process.exit(1); });

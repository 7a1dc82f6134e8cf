// Recall from Node.js: one SQL call to recall.hybrid_recall, the function the Python client
// and the CLI call. Ranking, filtering and the token budget happen in the database.
//
//   npm install                                  # once, here: the pg driver
//   DATABASE_URL=$(pyrecall db url) node recall.mjs "refund webhook" support '{"channel": "payments"}'
//
// Arguments: the query, the agent (default $PYRECALL_AGENT, else claude-code), and a metadata
// filter as JSON. Without a query embedding the text arm ranks alone; to rank by meaning as
// well, pass your embedding as text: query_embedding => $4::vector with '[0.12, -0.03, ...]'.
import pg from "pg";

const [query, agent = process.env.PYRECALL_AGENT ?? "claude-code", filter = null] = process.argv.slice(2);
if (!query) {
  console.error("usage: node recall.mjs QUERY [AGENT] [FILTER_JSON]");
  process.exit(2);
}
const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
await client.connect();
try {
  const { rows } = await client.query(
    `select chunk_id, session_id, kind, score, created_at, metadata, content
       from recall.hybrid_recall(agent_id => $1, query_text => $2, k => 5,
                                 token_budget => 1500, filter => $3::jsonb)`,
    [agent, query, filter]);
  console.log(JSON.stringify(rows, null, 2));
} finally {
  await client.end();
}

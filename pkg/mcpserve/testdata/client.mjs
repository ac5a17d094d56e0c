// A client of mcpd's /mcp built with the official TypeScript SDK, driven
// by TestTypeScriptClient: it prints one JSON object a line on stdout and
// takes commands ("read", "exit") a line on stdin.
//
// Environment: MCPD_SDK_DIR (the directory whose node_modules holds
// @modelcontextprotocol/sdk), MCPD_URL, MCPD_TOKEN (tenant A),
// MCPD_TOKEN_B (tenant B).
import { pathToFileURL } from 'node:url';
import { createInterface } from 'node:readline';

const sdk = (p) => import(pathToFileURL(`${process.env.MCPD_SDK_DIR}/node_modules/@modelcontextprotocol/sdk/dist/esm/${p}`).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { ResourceUpdatedNotificationSchema } = await sdk('types.js');

const url = new URL(process.env.MCPD_URL);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const skill = 'mcpd://skills/search';

async function connect(token, name) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  return client;
}

// No token: refused.
let unauthorized = false;
try {
  await connect('', 'no-token');
} catch (err) {
  unauthorized = /401|Unauthorized/i.test(String(err));
}

const a = await connect(process.env.MCPD_TOKEN, 'tenant-a');
const b = await connect(process.env.MCPD_TOKEN_B, 'tenant-b');
const updates = { a: 0, b: 0 };
a.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  updates.a++;
  out({ updated: n.params.uri, client: 'a' });
});
b.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  updates.b++;
  out({ updated: n.params.uri, client: 'b' });
});

const found = await a.callTool({ name: 'find_skill', arguments: { name: 'search' } });
const foundB = await b.callTool({ name: 'find_skill', arguments: { name: 'search' } });
const unknown = await a.callTool({ name: 'get_server', arguments: { module_name: 'nope' } });
await a.subscribeResource({ uri: skill });
await b.subscribeResource({ uri: skill });
out({
  ready: true,
  unauthorized,
  server: a.getServerVersion(),
  providers: found.structuredContent.providers,
  text: found.content[0].text,
  providersB: foundB.structuredContent.providers,
  unknownIsError: unknown.isError === true,
});

for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'read') {
    const r = await a.readResource({ uri: skill });
    out({ read: JSON.parse(r.contents[0].text) });
  } else if (line === 'exit') {
    out({ updates });
    await a.close();
    await b.close();
    process.exit(0);
  }
}

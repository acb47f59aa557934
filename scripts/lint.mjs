#!/usr/bin/env node
// `npm run lint`: rustfmt check and clippy (warnings are errors) for the host triple.
import { execFileSync } from 'node:child_process';
import { hostTriple } from './host.mjs';

const target = process.env.CARGO_BUILD_TARGET || hostTriple();
execFileSync('cargo', ['fmt', '--all', '--', '--check'], { stdio: 'inherit' });
execFileSync('cargo', ['clippy', '--all-targets', '--target', target, '--', '-D', 'warnings'], { stdio: 'inherit' });
execFileSync(process.execPath, ['scripts/lint-workflows.mjs'], { stdio: 'inherit' });

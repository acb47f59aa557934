#!/usr/bin/env node
// A "browser" for the gateway's sign-in (BROWSER=<this script>): a user who approves at once.
// It opens the authorization URL, and follows the authorization server's redirect to the
// gateway's loopback listener, as a browser would.
const [authorizationUrl] = process.argv.slice(2);
const answer = await fetch(authorizationUrl, { redirect: 'manual' });
const location = answer.headers.get('location');
if (!location) {
  console.error(`browser.mjs: the authorization server answered ${answer.status} without a redirect`);
  process.exit(1);
}
const landed = await fetch(new URL(location, authorizationUrl), { redirect: 'manual' });
console.error(`browser.mjs: redirect landed with ${landed.status}`);

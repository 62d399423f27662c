// `npm run build:web` (part of `npm run build` and `npm test`): bundles the browser code of the
// web console (coordinator/web) into coordinator/dist/public. Runs as scripts/dist/build-web.js.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildWeb } from './web-build.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const manifest = await buildWeb(root);
process.stdout.write(`web: ${Object.values(manifest).join(', ')}\n`);

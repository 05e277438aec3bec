import { defineConfig } from 'vite';
import preact from '@preact/preset-vite';

// The master (`yard up` prints its URL) serves the API; the dev server proxies
// /v1 and /healthz to it: YARD_MASTER=http://127.0.0.1:7420 npx vite
const master = process.env.YARD_MASTER || 'http://127.0.0.1:7420';

export default defineConfig({
  base: './',
  plugins: [preact()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false },
  server: {
    proxy: {
      '/v1': { target: master, changeOrigin: true },
      '/healthz': { target: master, changeOrigin: true },
    },
  },
  test: { environment: 'node', include: ['test/**/*.test.ts'] },
} as any);

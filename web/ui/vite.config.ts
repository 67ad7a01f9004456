// The dashboard is built into web/dist, which rackprof serve serves (and cmake installs).
import { defineConfig } from "vite";

export default defineConfig({
  build: {
    outDir: "../dist",
    emptyOutDir: true,
    // The Graphviz WebAssembly build is large; it is loaded only by the profile page.
    chunkSizeWarningLimit: 2000,
  },
  server: { proxy: { "/api": { target: "http://127.0.0.1:8080", ws: true } } },
});

// Unit tests of the dashboard's pure modules (src/**/*.test.ts), in Node: no browser, no DOM.
// The bundle never includes them: vite builds only what index.html's main.ts imports.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    environment: "node",
    include: ["src/**/*.test.ts"],
  },
});

import { describe, expect, it } from "vitest";
import {
  differential,
  frameColor,
  parseFolded,
  type Frame,
  invertedTree,
  leftHeavy,
  filterStacks,
  sandwich,
  busiestMatch,
} from "./flamegraph";

const child = (f: Frame, name: string) => {
  const c = f.children.find((x) => x.name === name);
  if (!c) throw new Error(`no frame ${name} under ${f.name}`);
  return c;
};

describe("parseFolded", () => {
  it("builds the tree under one root, each frame with what is above it", () => {
    const root = parseFolded("main;a 3\nmain;b 2\nmain 1\nmain;a;c 4\n");
    expect(root.name).toBe("all");
    expect(root.value).toBe(10);
    expect(root.self).toBe(0);
    const main = child(root, "main");
    expect([main.value, main.self]).toEqual([10, 1]);
    expect(main.children.map((c) => c.name)).toEqual(["a", "b"]);
    expect([child(main, "a").value, child(main, "a").self]).toEqual([7, 3]);
    expect([child(child(main, "a"), "c").value, child(child(main, "a"), "c").self]).toEqual([4, 4]);
    expect(child(main, "b").value).toBe(2);
  });

  it("skips comments, blank lines and stacks with no positive value", () => {
    const root = parseFolded("# folded\n\nmain;a 2\nno value\nmain;z 0\nmain;n -1\nmain;e 1e1\n");
    expect(root.value).toBe(12);
    expect(child(root, "main").children.map((c) => c.name)).toEqual(["a", "e"]);
  });

  it("keeps spaces inside frame names and tolerates trailing blanks", () => {
    const root = parseFolded("main;operator new(unsigned int) 5  \r\n");
    expect(child(child(root, "main"), "operator new(unsigned int)").value).toBe(5);
  });
});

describe("differential", () => {
  it("scales A to B's total and gives each frame of B its change", () => {
    const a = parseFolded("main;f 2\nmain;g 2\n");
    const b = parseFolded("main;f 6\nmain;h 2\n");
    const { tree, missing, largest } = differential(a, b);
    expect(tree).toBe(b);
    const main = child(tree, "main");
    expect(tree.delta).toBe(0);
    expect(main.delta).toBe(0); // 8 - 4 × 2
    expect(child(main, "f").delta).toBe(2); // 6 - 2 × 2
    expect(child(main, "h").delta).toBe(2); // new in B
    // A handful of samples: every change is within sampling noise.
    expect(child(main, "f").significant).toBe(false);
    expect(largest).toBe(0);
    expect(missing).toBe(0.5); // g, half of A, has no frame in B
  });

  it("treats an empty A as nothing to compare, the root not counting as a change", () => {
    const { missing, tree, largest } = differential(parseFolded(""), parseFolded("f 1\ng 3\n"));
    expect(missing).toBe(0);
    expect(tree.delta).toBe(4);
    expect(child(tree, "f").delta).toBe(1);
    expect(child(tree, "g").delta).toBe(3);
    expect(largest).toBe(0); // 3 samples: within noise
  });

  it("leaves two runs of one build grey: their changes are sampling noise", () => {
    const a = parseFolded("main;f 1000\nmain;g 1010\n");
    const b = parseFolded("main;f 1012\nmain;g 998\n");
    const { tree, largest } = differential(a, b);
    expect(largest).toBe(0);
    const main = child(tree, "main");
    for (const frame of [main, child(main, "f"), child(main, "g")])
      expect(frameColor(frame, largest, tree.value)).toBe("rgb(225,225,225)");
  });

  it("colours a real change, red where B spends more and blue where less", () => {
    const a = parseFolded("main;f 1000\nmain;g 1000\n");
    const b = parseFolded("main;f 1000\nmain;g 3000\n");
    const { tree, largest } = differential(a, b);
    const main = child(tree, "main");
    const g = child(main, "g");
    const f = child(main, "f");
    expect(g.significant).toBe(true);
    expect(f.significant).toBe(true);
    expect(largest).toBe(1000); // g: 3000 - 1000 × 2
    expect(frameColor(g, largest, tree.value)).toBe("rgb(235,0,0)");
    expect(frameColor(f, largest, tree.value)).toBe("rgb(0,0,235)");
  });
});

describe("the flame graph's views", () => {
  const tree = parseFolded("main;fast;work 10\nmain;slow;work 90\nmain 5\nmain;slow 1\n");
  it("left heavy: every frame's children widest first", () => {
    const heavy = leftHeavy(parseFolded("main;a 1\nmain;b 7\nmain;c 3\n"));
    expect(heavy.children[0].children.map((c) => c.name)).toEqual(["b", "c", "a"]);
  });
  it("inverted: where time was spent on top, its callers below, each sample once", () => {
    const up = invertedTree(tree);
    expect(up.value).toBe(tree.value);
    const work = up.children.find((c) => c.name === "work");
    expect(work?.value).toBe(100);
    expect(work?.children.map((c) => [c.name, c.value]).sort()).toEqual([
      ["fast", 10],
      ["slow", 90],
    ]);
    expect(work?.children.find((c) => c.name === "slow")?.children[0]).toMatchObject({
      name: "main",
      value: 90,
    });
    expect(up.children.find((c) => c.name === "main")?.value).toBe(5);
    expect(up.children.find((c) => c.name === "slow")?.value).toBe(1);
  });
});

describe("pprof's filters over the stacks", () => {
  const tree = parseFolded("main;fast;work 10\nmain;slow;work 90\nmain 5\nmain;slow 1\n");
  const folded = (f: Frame): string[] => {
    const out: string[] = [];
    const walk = (n: Frame, path: string[]) => {
      if (n.self > 0) out.push(`${path.join(";")} ${n.self}`);
      for (const c of n.children) walk(c, [...path, c.name]);
    };
    walk(f, []);
    return out.sort();
  };
  it("focus keeps the stacks through a match, ignore drops them, hide takes frames out", () => {
    expect(folded(filterStacks(tree, { focus: "^fast$" }))).toEqual(["main;fast;work 10"]);
    expect(folded(filterStacks(tree, { ignore: "slow" }))).toEqual(["main 5", "main;fast;work 10"]);
    // Their time goes to their callers: main keeps slow's own sample, work merges.
    expect(folded(filterStacks(tree, { hide: "^(fast|slow)$" }))).toEqual([
      "main 6",
      "main;work 100",
    ]);
    expect(filterStacks(tree, {}).value).toBe(tree.value);
  });
  it("throws on a pattern that is not a regular expression", () => {
    expect(() => filterStacks(tree, { focus: "(" })).toThrow();
  });
});

describe("the sandwich of one function", () => {
  const tree = parseFolded("main;fast;work 10\nmain;slow;work 90\nmain;slow 1\nmain;work;work 4\n");
  it("its callers and callees, each rooted at it, a recursion counted once", () => {
    const { callers, callees } = sandwich(tree, "work");
    expect(callers.name).toBe("work");
    expect(callers.value).toBe(104);
    expect(callers.children.map((c) => [c.name, c.value]).sort()).toEqual([
      ["fast", 10],
      ["main", 4],
      ["slow", 90],
    ]);
    expect(callees.value).toBe(104);
    expect(callees.children.map((c) => [c.name, c.value])).toEqual([["work", 4]]);
  });
  it("picks the busiest function the pattern matches", () => {
    expect(busiestMatch(tree, "^(fast|slow)$")).toBe("slow");
    expect(busiestMatch(tree, "")).toBeUndefined();
    expect(busiestMatch(tree, "nothing")).toBeUndefined();
  });
});

/**
 * No import circles among the modules of `src/` and `scripts/`: every static
 * import and re-export of a relative module (`import type` too) is an edge,
 * and the graph must have no strongly connected component of more than one
 * module. Values several layers need live in the lowest layer that owns
 * them (e.g. `src/config/upstream_fields.ts`, `src/rate_syntax.ts`).
 * Dynamic `import()` is not an edge: it loads later, on demand.
 */
import { assertEquals } from "../_asserts.ts";
import { ROOT } from "../_helpers.ts";

const STATIC_IMPORT = /(?:^|\n)\s*(?:import|export)\b[^;'"`]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']/g;
const SIDE_EFFECT_IMPORT = /(?:^|\n)\s*import\s*["'](\.{1,2}\/[^"']+)["']/g;

async function modules(dir: string, out: string[] = []): Promise<string[]> {
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) await modules(path, out);
    else if (/\.tsx?$/.test(entry.name)) out.push(path);
  }
  return out;
}

function resolve(from: string, specifier: string): string {
  return new URL(specifier, `file://${from}`).pathname;
}

/** The strongly connected components of more than one module (Tarjan). */
function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!graph.has(to)) continue;
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node)!, index.get(to)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component);
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

Deno.test("src/ and scripts/ have no import circle", async () => {
  const graph = new Map<string, string[]>();
  for (const dir of ["src", "scripts"]) {
    for (const path of await modules(`${ROOT}${dir}`)) {
      const text = await Deno.readTextFile(path);
      const targets = [...text.matchAll(STATIC_IMPORT), ...text.matchAll(SIDE_EFFECT_IMPORT)]
        .map((match) => resolve(path, match[1]));
      graph.set(path, targets);
    }
  }
  const named = circles(graph).map((component) =>
    component.map((path) => path.slice(ROOT.length)).sort().join(" → ")
  );
  assertEquals(named, [], "import circles (move what both sides need to a lower module)");
});

Deno.test("the circle check finds a circle when there is one", () => {
  const graph = new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]], ["e", ["e"]]]);
  assertEquals(circles(graph).map((c) => c.sort()), [["a", "b", "c"], ["e"]]);
});

/**
 * Where the web console lives. The bearer-token check lets these paths
 * through: the console checks its own session cookie (src/http/ui/routes.tsx).
 *
 * @module
 */

/** Where the console is mounted. */
export const UI = "/ui";

/** Whether a path belongs to the console (which checks its own session cookie). */
export function isConsolePath(path: string): boolean {
  return path === UI || path.startsWith(`${UI}/`);
}

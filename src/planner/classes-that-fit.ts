/** Classes named in one reason's list of where a replica would fit. */
const SHOWN = 6;

/**
 * A planner's reason with the classes of a cluster where the replica would fit: `…, or
 * a100-80g`, or `… a class with more memory such as a100-80g` where that is the last remedy.
 * Classes the reason names already (a MIG instance's larger profiles, its whole card) are not
 * named twice. One wording for placement and the catalog's warnings.
 */
export function withClassesThatFit(reason: string, classes: readonly string[]): string {
  const named = new Set(reason.split(/[\s,;:()]+/));
  const rest = classes.filter((c) => !named.has(c));
  if (rest.length === 0) return reason;
  const shown = rest.slice(0, SHOWN).join(' or ');
  const more = rest.length > SHOWN ? ` (and ${rest.length - SHOWN} more classes)` : '';
  return `${reason}${reason.endsWith('a class with more memory') ? ' such as' : ', or'} ${shown}${more}`;
}

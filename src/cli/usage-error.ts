/** The command line itself was wrong (exit status 2), as opposed to a refusal by the server (1). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** API errors as the real server writes them: a metav1.Status with reason, code and details. */
import { qualifiedName, type ResourceType } from './resources.js';

export interface StatusCause {
  reason: string;
  message: string;
  field: string;
}

export interface Status {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message?: string;
  reason?: string;
  details?: { name?: string; group?: string; kind?: string; uid?: string; causes?: StatusCause[] };
  code: number;
}

export class ApiError extends Error {
  readonly status: Status;
  constructor(status: Status) {
    super(status.message);
    this.status = status;
  }
  get code() {
    return this.status.code;
  }
}

const failure = (code: number, reason: string, message: string, details?: Status['details']) =>
  new ApiError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    details,
    code,
  });

const details = (rt: ResourceType, name: string) => ({
  name,
  ...(rt.group === '' ? {} : { group: rt.group }),
  kind: rt.plural,
});

export const notFound = (rt: ResourceType, name: string) =>
  failure(404, 'NotFound', `${qualifiedName(rt)} "${name}" not found`, details(rt, name));

export const alreadyExists = (rt: ResourceType, name: string) =>
  failure(409, 'AlreadyExists', `${qualifiedName(rt)} "${name}" already exists`, details(rt, name));

export const conflict = (rt: ResourceType, name: string) =>
  failure(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualifiedName(rt)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    details(rt, name),
  );

/** 422 Invalid: `Deployment.apps "x" is invalid: [a: Required value, b: Invalid value: ...]`. */
export function invalid(rt: ResourceType, name: string, causes: StatusCause[]) {
  const kind = rt.group === '' ? rt.kind : `${rt.kind}.${rt.group}`;
  const parts = causes.map((c) => `${c.field}: ${c.message}`);
  const list = parts.length === 1 ? parts[0]! : `[${parts.join(', ')}]`;
  return failure(422, 'Invalid', `${kind} "${name}" is invalid: ${list}`, {
    name,
    ...(rt.group === '' ? {} : { group: rt.group }),
    kind: rt.kind,
    causes,
  });
}

export const badRequest = (message: string) => failure(400, 'BadRequest', message);
export const unauthorized = () => failure(401, 'Unauthorized', 'Unauthorized');
export const methodNotAllowed = (message: string) => failure(405, 'MethodNotAllowed', message);
export const unsupportedMediaType = (type: string) =>
  failure(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got ${type})`,
  );
export const gone = (message: string) => failure(410, 'Expired', message);
export const internalError = (message: string) =>
  failure(500, 'InternalError', `Internal error occurred: ${message}`);
/** A custom resource's PUT without metadata.resourceVersion (CRDs allow no unconditional update). */
export const updateNeedsResourceVersion = (rt: ResourceType, name: string) => {
  const message = 'Invalid value: 0x0: must be specified for an update';
  return failure(
    422,
    'Invalid',
    `${qualifiedName(rt)} "${name}" is invalid: metadata.resourceVersion: ${message}`,
    {
      ...details(rt, name),
      causes: [{ reason: 'FieldValueInvalid', message, field: 'metadata.resourceVersion' }],
    },
  );
};
export const pathNotFound = () =>
  failure(404, 'NotFound', 'the server could not find the requested resource');

/** Where the control plane serves its API: the routes of src/server/api, and the mirror's blobs beside them. */
export const apiPrefix = '/api/v1';

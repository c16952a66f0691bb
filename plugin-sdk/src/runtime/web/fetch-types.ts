// PLACEHOLDER (being written): Fetch's Headers, Request and Response for the sandbox.
export const Headers = undefined;
export const Request = undefined;
export const Response = undefined;

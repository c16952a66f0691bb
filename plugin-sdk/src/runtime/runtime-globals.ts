/** The global the runtime script leaves its `install(hostLog)` on (the host deletes it). */
export const RUNTIME_INSTALL_GLOBAL = '__gatehouseInstall';

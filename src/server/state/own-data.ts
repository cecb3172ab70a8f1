/**
 * The control plane's own files and folders, which no model source may be or hold: its data
 * dir (database, engine key secret, CA, mirror), its database and settings file wherever they
 * are, its TLS key, its kubeconfig. A source naming one would let an admin's typo (or a stolen
 * admin key) show their names and sizes, and hand them to engines as weights.
 */
import type { LoadedSettings } from '../../config/load.js';
import type { OwnPath } from '../../models/local-source.js';

export function ownData(loaded: LoadedSettings): OwnPath[] {
  const s = loaded.settings;
  const out: OwnPath[] = [
    { path: s.data_dir, what: "the control plane's data dir" },
    { path: s.mirror.dir, what: "the control plane's mirror of model files" },
    { path: loaded.source.path, what: "the control plane's settings file" },
  ];
  if (s.database.startsWith('sqlite:')) {
    const db = s.database.slice('sqlite:'.length);
    // SQLite keeps its write-ahead log and shared memory beside the file.
    for (const path of [db, `${db}-wal`, `${db}-shm`, `${db}-journal`])
      out.push({ path, what: "the control plane's database" });
  }
  if (s.tls.cert !== undefined) out.push({ path: s.tls.cert, what: "the control plane's TLS certificate" });
  if (s.tls.key !== undefined) out.push({ path: s.tls.key, what: "the control plane's TLS key" });
  const kubeconfig = s.kubernetes?.kubeconfig;
  if (kubeconfig !== undefined && kubeconfig !== '')
    out.push({ path: kubeconfig, what: "the control plane's kubeconfig" });
  return out;
}

import { EntitySchema, OptionalProps } from '@mikro-orm/core';

/** A registered worker agent. Its secret is stored as SHA-256 only. */
export class SpeechWorker {
  [OptionalProps]?: 'createdAt' | 'lastSeenAt' | 'revokedAt' | 'capabilities' | 'contractVersion' | 'agentVersion' | 'hostname';
  id!: number;
  name!: string;
  secretHash!: string;
  createdAt: Date = new Date();
  lastSeenAt: Date | null = null;
  revokedAt: Date | null = null;
  capabilities: WorkerCapabilities | null = null;
  contractVersion: number | null = null;
  agentVersion: string | null = null;
  hostname: string | null = null;
}

export interface WorkerCapabilities {
  models: string[];
  engines: string[];
  /** Speaker diarization (contract 3 and later; an older worker's claim is ignored). */
  diarization: boolean;
  diarizationEngine?: string;
  /** Why a diarizer the host configured cannot run (missing or broken model files). */
  diarizationError?: string;
  canFetchUrls: boolean;
  device: string;
  /** Model → ISO 639-1 languages the worker says it transcribes (absent: not said; [] any). */
  modelLanguages?: Record<string, string[]>;
}

export const SpeechWorkerSchema = new EntitySchema<SpeechWorker>({
  class: SpeechWorker,
  tableName: 'speech_workers',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    name: { type: 'string', length: 100 },
    secretHash: { type: 'string', length: 64, fieldName: 'secret_hash' },
    createdAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'created_at' },
    lastSeenAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'last_seen_at', nullable: true },
    revokedAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'revoked_at', nullable: true },
    capabilities: { type: 'json', columnType: 'jsonb', nullable: true },
    contractVersion: { type: 'integer', fieldName: 'contract_version', nullable: true },
    agentVersion: { type: 'string', length: 50, fieldName: 'agent_version', nullable: true },
    hostname: { type: 'string', length: 255, nullable: true },
  },
});

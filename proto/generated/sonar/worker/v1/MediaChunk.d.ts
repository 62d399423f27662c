// Original file: worker.proto

import type { Long } from '@grpc/proto-loader';

export interface MediaChunk {
  'data'?: (Buffer | Uint8Array | string);
  'offset'?: (number | string | Long);
  /**
   * Sent with every chunk so a resumed download can check the whole file.
   */
  'total_size'?: (number | string | Long);
  'sha256'?: (string);
}

export interface MediaChunk__Output {
  'data': (Buffer);
  'offset': (number);
  /**
   * Sent with every chunk so a resumed download can check the whole file.
   */
  'total_size': (number);
  'sha256': (string);
}

import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type { Capabilities as _sonar_worker_v1_Capabilities, Capabilities__Output as _sonar_worker_v1_Capabilities__Output } from './sonar/worker/v1/Capabilities.js';
import type { ClaimRequest as _sonar_worker_v1_ClaimRequest, ClaimRequest__Output as _sonar_worker_v1_ClaimRequest__Output } from './sonar/worker/v1/ClaimRequest.js';
import type { ClaimResponse as _sonar_worker_v1_ClaimResponse, ClaimResponse__Output as _sonar_worker_v1_ClaimResponse__Output } from './sonar/worker/v1/ClaimResponse.js';
import type { CompleteRequest as _sonar_worker_v1_CompleteRequest, CompleteRequest__Output as _sonar_worker_v1_CompleteRequest__Output } from './sonar/worker/v1/CompleteRequest.js';
import type { CompleteResponse as _sonar_worker_v1_CompleteResponse, CompleteResponse__Output as _sonar_worker_v1_CompleteResponse__Output } from './sonar/worker/v1/CompleteResponse.js';
import type { DiarizationResult as _sonar_worker_v1_DiarizationResult, DiarizationResult__Output as _sonar_worker_v1_DiarizationResult__Output } from './sonar/worker/v1/DiarizationResult.js';
import type { HeartbeatRequest as _sonar_worker_v1_HeartbeatRequest, HeartbeatRequest__Output as _sonar_worker_v1_HeartbeatRequest__Output } from './sonar/worker/v1/HeartbeatRequest.js';
import type { HeartbeatResponse as _sonar_worker_v1_HeartbeatResponse, HeartbeatResponse__Output as _sonar_worker_v1_HeartbeatResponse__Output } from './sonar/worker/v1/HeartbeatResponse.js';
import type { HelloRequest as _sonar_worker_v1_HelloRequest, HelloRequest__Output as _sonar_worker_v1_HelloRequest__Output } from './sonar/worker/v1/HelloRequest.js';
import type { HelloResponse as _sonar_worker_v1_HelloResponse, HelloResponse__Output as _sonar_worker_v1_HelloResponse__Output } from './sonar/worker/v1/HelloResponse.js';
import type { JobAssignment as _sonar_worker_v1_JobAssignment, JobAssignment__Output as _sonar_worker_v1_JobAssignment__Output } from './sonar/worker/v1/JobAssignment.js';
import type { LeaseRef as _sonar_worker_v1_LeaseRef, LeaseRef__Output as _sonar_worker_v1_LeaseRef__Output } from './sonar/worker/v1/LeaseRef.js';
import type { MediaChunk as _sonar_worker_v1_MediaChunk, MediaChunk__Output as _sonar_worker_v1_MediaChunk__Output } from './sonar/worker/v1/MediaChunk.js';
import type { MediaRequest as _sonar_worker_v1_MediaRequest, MediaRequest__Output as _sonar_worker_v1_MediaRequest__Output } from './sonar/worker/v1/MediaRequest.js';
import type { ModelLanguages as _sonar_worker_v1_ModelLanguages, ModelLanguages__Output as _sonar_worker_v1_ModelLanguages__Output } from './sonar/worker/v1/ModelLanguages.js';
import type { ProgressAck as _sonar_worker_v1_ProgressAck, ProgressAck__Output as _sonar_worker_v1_ProgressAck__Output } from './sonar/worker/v1/ProgressAck.js';
import type { ProgressUpdate as _sonar_worker_v1_ProgressUpdate, ProgressUpdate__Output as _sonar_worker_v1_ProgressUpdate__Output } from './sonar/worker/v1/ProgressUpdate.js';
import type { ReleaseRequest as _sonar_worker_v1_ReleaseRequest, ReleaseRequest__Output as _sonar_worker_v1_ReleaseRequest__Output } from './sonar/worker/v1/ReleaseRequest.js';
import type { ReleaseResponse as _sonar_worker_v1_ReleaseResponse, ReleaseResponse__Output as _sonar_worker_v1_ReleaseResponse__Output } from './sonar/worker/v1/ReleaseResponse.js';
import type { SegmentMsg as _sonar_worker_v1_SegmentMsg, SegmentMsg__Output as _sonar_worker_v1_SegmentMsg__Output } from './sonar/worker/v1/SegmentMsg.js';
import type { SpeakerTurn as _sonar_worker_v1_SpeakerTurn, SpeakerTurn__Output as _sonar_worker_v1_SpeakerTurn__Output } from './sonar/worker/v1/SpeakerTurn.js';
import type { WordMsg as _sonar_worker_v1_WordMsg, WordMsg__Output as _sonar_worker_v1_WordMsg__Output } from './sonar/worker/v1/WordMsg.js';
import type { WorkerServiceClient as _sonar_worker_v1_WorkerServiceClient, WorkerServiceDefinition as _sonar_worker_v1_WorkerServiceDefinition } from './sonar/worker/v1/WorkerService.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  sonar: {
    worker: {
      v1: {
        Capabilities: MessageTypeDefinition<_sonar_worker_v1_Capabilities, _sonar_worker_v1_Capabilities__Output>
        ClaimRequest: MessageTypeDefinition<_sonar_worker_v1_ClaimRequest, _sonar_worker_v1_ClaimRequest__Output>
        ClaimResponse: MessageTypeDefinition<_sonar_worker_v1_ClaimResponse, _sonar_worker_v1_ClaimResponse__Output>
        CompleteRequest: MessageTypeDefinition<_sonar_worker_v1_CompleteRequest, _sonar_worker_v1_CompleteRequest__Output>
        CompleteResponse: MessageTypeDefinition<_sonar_worker_v1_CompleteResponse, _sonar_worker_v1_CompleteResponse__Output>
        DiarizationResult: MessageTypeDefinition<_sonar_worker_v1_DiarizationResult, _sonar_worker_v1_DiarizationResult__Output>
        HeartbeatRequest: MessageTypeDefinition<_sonar_worker_v1_HeartbeatRequest, _sonar_worker_v1_HeartbeatRequest__Output>
        HeartbeatResponse: MessageTypeDefinition<_sonar_worker_v1_HeartbeatResponse, _sonar_worker_v1_HeartbeatResponse__Output>
        HelloRequest: MessageTypeDefinition<_sonar_worker_v1_HelloRequest, _sonar_worker_v1_HelloRequest__Output>
        HelloResponse: MessageTypeDefinition<_sonar_worker_v1_HelloResponse, _sonar_worker_v1_HelloResponse__Output>
        JobAssignment: MessageTypeDefinition<_sonar_worker_v1_JobAssignment, _sonar_worker_v1_JobAssignment__Output>
        LeaseRef: MessageTypeDefinition<_sonar_worker_v1_LeaseRef, _sonar_worker_v1_LeaseRef__Output>
        MediaChunk: MessageTypeDefinition<_sonar_worker_v1_MediaChunk, _sonar_worker_v1_MediaChunk__Output>
        MediaRequest: MessageTypeDefinition<_sonar_worker_v1_MediaRequest, _sonar_worker_v1_MediaRequest__Output>
        ModelLanguages: MessageTypeDefinition<_sonar_worker_v1_ModelLanguages, _sonar_worker_v1_ModelLanguages__Output>
        ProgressAck: MessageTypeDefinition<_sonar_worker_v1_ProgressAck, _sonar_worker_v1_ProgressAck__Output>
        ProgressUpdate: MessageTypeDefinition<_sonar_worker_v1_ProgressUpdate, _sonar_worker_v1_ProgressUpdate__Output>
        ReleaseRequest: MessageTypeDefinition<_sonar_worker_v1_ReleaseRequest, _sonar_worker_v1_ReleaseRequest__Output>
        ReleaseResponse: MessageTypeDefinition<_sonar_worker_v1_ReleaseResponse, _sonar_worker_v1_ReleaseResponse__Output>
        SegmentMsg: MessageTypeDefinition<_sonar_worker_v1_SegmentMsg, _sonar_worker_v1_SegmentMsg__Output>
        SpeakerTurn: MessageTypeDefinition<_sonar_worker_v1_SpeakerTurn, _sonar_worker_v1_SpeakerTurn__Output>
        WordMsg: MessageTypeDefinition<_sonar_worker_v1_WordMsg, _sonar_worker_v1_WordMsg__Output>
        WorkerService: SubtypeConstructor<typeof grpc.Client, _sonar_worker_v1_WorkerServiceClient> & { service: _sonar_worker_v1_WorkerServiceDefinition }
      }
    }
  }
}


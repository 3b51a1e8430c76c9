import { CodedError } from '../contracts/errors.js';
import type { ChannelMessage } from '../contracts/message.js';
import type { Admission, Incoming } from '../contracts/topology.js';
import { isFiringMessage } from './lane-batch.js';

/**
 * A reminder's or a schedule's firing that the inbox refused as full (`[cluster] max_queued`):
 * INBOX_FULL for its caller, which tries it again (a reminder is put off, a schedule retried).
 * It has no sender to tell "busy", and taken for delivered it was marked fired and lost.
 * Undefined for anything else.
 */
export function fullFiring(msg: ChannelMessage, admission: Admission): CodedError | undefined {
  if (admission !== 'full' || !isFiringMessage(msg)) return undefined;
  return new CodedError('INBOX_FULL', `channel "${msg.channelId}": a ${msg.synthetic!.kind} firing was not stored`);
}

/**
 * A held batch's write results with each full firing turned into its refusal: IntakeHold then
 * rejects that firing's deliver call instead of handing it on as stored.
 */
export function refuseFullFirings(batch: readonly Incoming[], results: Array<PromiseSettledResult<Admission>>): Array<PromiseSettledResult<Admission>> {
  return results.map((r, i) => {
    const refusal = r.status === 'fulfilled' ? fullFiring(batch[i]!.msg, r.value) : undefined;
    return refusal ? { status: 'rejected', reason: refusal } : r;
  });
}

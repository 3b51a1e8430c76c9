import { builtinKinds } from '../../channels/registry.js';
import { ChannelKinds } from '../../src/config/kinds.js';

/** The channel kinds channeld ships, as the `channeld` executable hands them to the CLI. */
export const kinds = new ChannelKinds(builtinKinds);
